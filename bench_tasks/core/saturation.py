"""The harness watching itself: is any of its processes the bottleneck of the cell?

A number is the broker's only if no message queued inside the harness. The send side already shows that
as schedule lag; this module gives every worker process the same view of itself, and turns it into a
verdict per cell:

- **busy**: the share of the measure phase the process's Python threads ran on a CPU
  (`/proc/self/task/*/schedstat`). Python threads share one interpreter lock, so their sum is all one
  core can give them; at 97 % or more the process had work waiting the whole time, so messages waited
  inside the harness. Native threads (librdkafka's) are judged one by one. How long each thread waited
  runnable for a CPU is recorded beside it: on a crowded host a starved process lags without being busy,
  and then its lag or backlog says so.
- **starved**: a thread on the message path (the driver names them: nats-py's event loop; confluent-kafka's
  poll and consume threads and librdkafka's broker threads) that waited for a CPU at least 10 % of the
  measure phase, on average a millisecond or more each time it was woken: whatever woke it (a message, a
  delivery report) waited that long for the harness. The queue this builds may sit in the broker or the
  kernel, where no client sees it (a starved librdkafka fetches late), so it is judged from the thread
  itself. A thread woken thousands of times a second on a busy host waits for a CPU often but briefly;
  that is recorded, not failed. Other threads (a Kafka worker's event loop that only reports, librdkafka's
  timers, multiprocessing's queue feeder) are recorded, never judged; neither is a producer's event loop,
  whose every delay is measured exactly as send lag.
- **backlog**: messages the client held for the harness that it had not taken yet (librdkafka's fetch
  queue or unserved delivery reports, bytes nats-py had not parsed), sampled with every progress report.
  Expressed as time at the process's own rate, a backlog above the cell's `max_schedule_lag_ms` in most of
  the measure phase is a queue that persisted inside the harness, not a burst after a stall draining.
- **receive wait**: where the client signals when bytes reach the process (nats-py), how long each message
  then waited inside the harness until it was handed over (the generator's `receive_wait_us`): the receive
  side's send lag, gated the same way (p99.9 under `max_schedule_lag_ms`).
- **pauses** (worker programs, docs/workers.md): moments the whole worker could not run (stopped, throttled,
  starved, a JVM safepoint), measured by the worker itself; one longer than `max_schedule_lag_ms` in the measure
  phase held every message passing through it that long (`core.pauses`).
- **cpu**: the process's CPU (all threads) per second of the measure phase, for the record.
- **dropped**: messages that reached the process but were thrown away because a queue inside the harness was
  full (nats-py's slow consumer, a relay's forwarding queue). Any fails the cell: the harness lost them, and
  the system would be blamed. Beside it, `client_errors`: what the clients reported beside their messages
  (counted by kind, the last kept), recorded, not judged.

`ProcessWatch` samples (I/O at the edge: it reads /proc); `summarize` and `verdict` are pure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Version history of the per-cell `harness` facts (result.json, the cells row's results_json):
#   1 — first version: per worker `samples`, `seconds`, `rate_per_s`, `busy`, `waiting_for_cpu`, `cpu_cores`,
#       `threads` (cpu, waiting_for_cpu, wakeups_per_s, mean_cpu_wait_us), `message_threads`, `backlog`, and
#       for consumers `receive_wait_us`.
#   2 — per worker `dropped` (messages a full queue inside the harness threw away) and `client_errors`
#       (`count`, `kinds`: count per kind, `last`); a version-1 worker has neither (read as none). A worker
#       that sampled itself fewer than twice gives `samples` and `window_s` only (also in late version-1 facts).
#   3 — a worker program (docs/workers.md) adds `runtime` (jvm: `busy` is its busiest message thread's share, a
#       thread that spins or yields by design counted by the time it spent on messages, and listed in
#       `polling_threads`: always runnable, it is judged by the pauses, not by its wait for a CPU), `pauses`
#       (moments it could not run at all: count, total_ms, max_ms, max_at_ns, max_cause; `core.pauses`) and
#       `program`; Python workers' facts are as in version 2.
HARNESS_FACTS_VERSION = 3
BUSY_LIMIT = 0.97  # runnable this share of the measure phase: the process never caught up
# A receiving process runnable (running, or waiting for a CPU) this share of the measure phase while fewer than
# KEEP_UP of the offered messages per second arrived is why they did not: a broker that falls behind leaves its
# consumers idle, not runnable. (Measured: one NATS core consumer at 90-96 % busy took 373,000-401,000 of
# 418,000-800,000 msg/s offered, its queue in the server's buffers, out of the client's sight; in CI, one ran
# 88 % and waited for a CPU 12 % while 353,000 of 1,000,000 msg/s arrived.)
BUSY_BEHIND = 0.90
KEEP_UP = 0.98
BACKLOG_SHARE = 0.5  # backlog over the limit in more than this share of the measure samples: it persisted
STARVED_WAIT_SHARE = 0.1  # a thread that waited for a CPU this share of the measure phase …
STARVED_WAIT_US = 1000.0  # … this long on average per wake-up, was starved
SAMPLE_EVERY_S = 0.25  # how often a worker samples itself (its progress report)
UNWATCHED_WINDOW_S = 1.0  # a measure phase this long with fewer than two self-samples: the watcher starved too
PYTHON_THREAD_PREFIX = "py-"  # harness threads that run Python (they share the interpreter lock with main)
_TASKS = Path("/proc/self/task")


@dataclass(frozen=True)
class ThreadTimes:
    """Cumulative nanoseconds one thread ran, and waited runnable for a CPU, and how often it was put on one."""

    run_ns: int
    wait_ns: int
    slices: int = 0


class ThreadReader:
    """Reads every thread of this process by name (the main thread as `main`), times of same-named threads
    added. Each thread's name is read once and its schedstat file kept open (a sample is then one `pread`
    per thread, tens of microseconds, not the half millisecond of opening files: samples must not delay
    the messages the process handles)."""

    def __init__(self, tasks: Path = _TASKS):
        self.tasks = tasks
        self.main = str(os.getpid())
        self._open: dict[str, tuple[str, int]] = {}  # tid -> (name, schedstat fd)

    def __call__(self) -> dict[str, ThreadTimes]:
        tids = set(os.listdir(self.tasks))
        for gone in set(self._open) - tids:
            os.close(self._open.pop(gone)[1])
        out: dict[str, ThreadTimes] = {}
        for tid in tids:
            try:
                name, fd = self._open.get(tid) or self._add(tid)
                run, wait, slices = (int(v) for v in os.pread(fd, 256, 0).split()[:3])
            except (OSError, ValueError):  # the thread ended between listing and reading
                continue
            seen = out.get(name, ThreadTimes(0, 0, 0))
            out[name] = ThreadTimes(run + seen.run_ns, wait + seen.wait_ns, slices + seen.slices)
        return out

    def _add(self, tid: str) -> tuple[str, int]:
        name = "main" if tid == self.main else (self.tasks / tid / "comm").read_text().strip()
        self._open[tid] = (name, os.open(self.tasks / tid / "schedstat", os.O_RDONLY))
        return self._open[tid]


def read_threads(tasks: Path = _TASKS) -> dict[str, ThreadTimes]:
    """One reading of every thread (see ThreadReader)."""
    reader = ThreadReader(tasks)
    try:
        return reader()
    finally:
        for _, fd in reader._open.values():
            os.close(fd)


def process_cpu_ns() -> int:
    t = os.times()
    return int((t.user + t.system) * 1e9)


@dataclass
class ProcessWatch:
    """Samples of one worker process: when, its threads' times, its CPU, the client's backlog and how many
    messages it had handled (sent or received) by then. `sample()` is called with each progress report."""

    clock: Callable[[], int] = time.monotonic_ns
    read: Callable[[], dict[str, ThreadTimes]] = field(default_factory=ThreadReader)
    cpu: Callable[[], int] = process_cpu_ns
    at_ns: list[int] = field(default_factory=list)
    threads: list[dict[str, ThreadTimes]] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)
    backlog: list[int] = field(default_factory=list)  # -1: the client could not tell
    handled: list[int] = field(default_factory=list)
    message_threads: tuple[str, ...] = ()  # name prefixes of the threads every message passes (the driver's)
    # python: threads that run Python share one interpreter lock, so "busy" is their sum; jvm (or any runtime
    # without such a lock): "busy" is the busiest message thread's share, each thread judged alone.
    runtime: str = "python"

    def sample(self, backlog: int | None, handled: int) -> None:
        self.at_ns.append(self.clock())
        self.threads.append(self.read())
        self.cpu_ns.append(self.cpu())
        self.backlog.append(-1 if backlog is None else backlog)
        self.handled.append(handled)

    def summary(self, window_ns: tuple[int, int], limit_ms: float) -> dict[str, Any]:
        return summarize(self, window_ns, limit_ms)


def summarize(watch: ProcessWatch, window_ns: tuple[int, int], limit_ms: float) -> dict[str, Any]:
    """The measure phase (`window_ns`) of one process as plain data: busy share of its Python threads and of
    each thread, CPU cores used, message rate, and the backlog in messages and as time at that rate."""
    at = np.asarray(watch.at_ns, dtype=np.int64)
    inside = np.flatnonzero((at >= window_ns[0]) & (at <= window_ns[1]))
    if inside.size < 2:  # fewer than two samples in the window: nothing to measure, but the window says why
        return {"samples": int(inside.size), "window_s": round((window_ns[1] - window_ns[0]) / 1e9, 3)}
    first, last = int(inside[0]), int(inside[-1])
    wall_ns = int(at[last] - at[first])
    threads = _thread_busy(watch.threads[first], watch.threads[last], wall_ns)
    busy, waiting = _busy(threads, watch)
    rate = (watch.handled[last] - watch.handled[first]) / (wall_ns / 1e9)
    return {
        "samples": int(inside.size),
        "seconds": round(wall_ns / 1e9, 3),
        "rate_per_s": round(rate, 1),
        "busy": round(busy, 4),
        "waiting_for_cpu": round(waiting, 4),
        "cpu_cores": round((watch.cpu_ns[last] - watch.cpu_ns[first]) / wall_ns, 4),
        "threads": threads,
        "message_threads": list(watch.message_threads),
        "backlog": _backlog(np.asarray(watch.backlog, dtype=np.int64)[inside], rate, limit_ms),
        **({} if watch.runtime == "python" else {"runtime": watch.runtime}),
    }


def _busy(threads: Mapping[str, Mapping[str, float]], watch: ProcessWatch) -> tuple[float, float]:
    """(busy, waiting for a CPU): Python's threads added (one interpreter lock), else the busiest message thread."""
    if watch.runtime == "python":
        python = [v for name, v in threads.items() if name == "main" or name.startswith(PYTHON_THREAD_PREFIX)]
        return sum(v["cpu"] for v in python), sum(v["waiting_for_cpu"] for v in python)
    path = [v for name, v in threads.items() if watch.message_threads and name.startswith(watch.message_threads)]
    if not path:
        return 0.0, 0.0
    busiest = max(path, key=lambda v: v["cpu"])
    return busiest["cpu"], busiest["waiting_for_cpu"]


def _thread_busy(
    before: Mapping[str, ThreadTimes], after: Mapping[str, ThreadTimes], wall_ns: int
) -> dict[str, dict[str, float]]:
    out = {}
    for name, end in sorted(after.items()):
        start = before.get(name, ThreadTimes(0, 0, 0))
        run, wait, slices = end.run_ns - start.run_ns, end.wait_ns - start.wait_ns, end.slices - start.slices
        out[name] = {
            "cpu": round(run / wall_ns, 4),
            "waiting_for_cpu": round(wait / wall_ns, 4),
            "wakeups_per_s": round(slices / (wall_ns / 1e9), 1),
            "mean_cpu_wait_us": round(wait / slices / 1e3, 1) if slices else 0.0,
        }
    return out


def _backlog(samples: np.ndarray, rate_per_s: float, limit_ms: float) -> dict[str, Any] | None:
    known = samples[samples >= 0]
    if known.size == 0:
        return None
    as_ms = known / rate_per_s * 1e3 if rate_per_s > 0 else np.where(known > 0, np.inf, 0.0)
    return {
        "messages_p50": int(np.median(known)),
        "messages_max": int(known.max()),
        "ms_p50": round(float(np.median(as_ms)), 3),
        "ms_max": round(float(as_ms.max()), 3),
        "share_over_limit": round(float(np.mean(as_ms > limit_ms)), 4),
    }


def verdict(
    workers: Mapping[str, Mapping[str, Any]],
    limit_ms: float,
    gated: Iterable[str],
    measure_start_ns: int | None = None,
) -> list[str]:
    """Why the harness saturated, one line per worker that did (empty: it did not). `workers` maps a worker
    name (`producer p0`, `consumer c1`) to its summary; only names in `gated` can fail the cell (unmeasured
    workers, such as lagging consumers whose backlog is the point, are recorded only). `measure_start_ns` places
    a worker's pause on the measure phase's clock in the reason."""
    reasons = []
    for name in gated:
        s = workers.get(name)
        if not s:
            continue
        if s.get("dropped"):
            reasons.append(
                f"harness dropped {s['dropped']:,} messages: {name} received them but a queue inside the harness "
                "was full (a slow consumer), so they count as lost though the system delivered them"
            )
        reasons += _paused(name, s, limit_ms, measure_start_ns)
        if s.get("samples", 0) < 2:
            if s.get("window_s", 0.0) >= UNWATCHED_WINDOW_S:
                reasons.append(_unwatched(name, s))
            continue
        busy_threads = {t: v["cpu"] for t, v in s["threads"].items() if v["cpu"] >= BUSY_LIMIT and t != "main"}
        if s.get("runtime"):  # no interpreter lock: only the message path's threads matter, each on its own
            busy_threads = {t: c for t, c in busy_threads.items() if t.startswith(tuple(s.get("message_threads", ())))}
        if s["busy"] >= BUSY_LIMIT and not s.get("runtime"):
            reasons.append(
                f"harness saturated: {name} ran Python {s['busy']:.0%} of the measure phase (one core is all its "
                f"threads can share; process CPU {s['cpu_cores']:.2f} cores at {s['rate_per_s']:,.0f} msg/s)"
            )
        elif busy_threads:
            worst = max(busy_threads, key=busy_threads.__getitem__)
            reasons.append(
                f"harness saturated: {name} thread {worst} ran {busy_threads[worst]:.0%} of the measure phase"
            )
        path = tuple(s.get("message_threads", ()))
        polling = set(s.get("polling_threads", ()))  # always runnable by design: judged by their pauses instead
        starved = {
            t: v
            for t, v in s["threads"].items()
            if t not in polling and _on_message_path(t, path, s.get("role")) and _starved(v)
        }
        if starved:
            worst = max(starved, key=lambda t: starved[t]["waiting_for_cpu"])
            v = starved[worst]
            reasons.append(
                f"harness saturated: {name} thread {worst} was starved of CPU: it waited for one "
                f"{v['waiting_for_cpu']:.0%} of the measure phase and ran {v['cpu']:.0%} (on average "
                f"{v['mean_cpu_wait_us']:,.0f} µs per wake-up), so what woke it waited inside the harness"
            )
        wait = s.get("receive_wait_us")
        if wait and wait["99.9"] > limit_ms * 1e3:
            reasons.append(
                f"harness saturated: {name} held messages {wait['99.9'] / 1e3:,.2f} ms at p99.9 (max "
                f"{wait['max'] / 1e3:,.2f} ms) between their arrival and their hand-over, over "
                f"max_schedule_lag_ms={limit_ms:g}"
            )
        backlog = s.get("backlog")
        if backlog and backlog["share_over_limit"] > BACKLOG_SHARE:
            reasons.append(
                f"harness saturated: {name} backlog {backlog['messages_p50']:,} messages at the median "
                f"(≈ {backlog['ms_p50']:.1f} ms at {s['rate_per_s']:,.0f} msg/s; max {backlog['messages_max']:,}) "
                f"over max_schedule_lag_ms={limit_ms:g} in {backlog['share_over_limit']:.0%} of the measure phase"
            )
    return reasons


def _paused(name: str, s: Mapping[str, Any], limit_ms: float, measure_start_ns: int | None) -> list[str]:
    """A worker that could not run at all for longer than the limit (`core.pauses`): every message on its way
    through it waited that long inside the harness."""
    pauses = s.get("pauses") or {}
    if pauses.get("max_ms", 0.0) <= limit_ms:
        return []
    when = ""
    if measure_start_ns is not None and pauses.get("max_at_ns") is not None:
        when = f" at measure {(pauses['max_at_ns'] - measure_start_ns) / 1e9:+.3f} s"
    return [
        f"harness saturated: {name} could not run for {pauses['max_ms']:,.1f} ms{when} "
        f"({pauses.get('max_cause', 'cause unknown')}; {pauses.get('count', 0)} pause(s) of 1 ms or more in the "
        f"measure phase), over max_schedule_lag_ms={limit_ms:g}"
    ]


def fell_behind(
    workers: Mapping[str, Mapping[str, Any]], receivers: Iterable[str], arrived_per_s: float, offered_per_s: float
) -> list[str]:
    """Receiving workers (`receivers`) that were busy while the cell's arrivals fell short of the offered rate:
    the harness, not the system, fell behind, though its own backlog check saw no queue (it sat in the
    broker's buffers for that client)."""
    if arrived_per_s >= KEEP_UP * offered_per_s:
        return []
    return [
        f"harness saturated: {name} was runnable {_runnable(s):.0%} of the measure phase (ran Python {s['busy']:.0%}, "
        f"waited for a CPU {s.get('waiting_for_cpu', 0.0):.0%}) while {arrived_per_s:,.0f} of {offered_per_s:,.0f} "
        "msg/s offered arrived: the receiving harness, not the system, fell behind"
        for name in receivers
        if (s := workers.get(name)) and s.get("samples", 0) >= 2 and _runnable(s) >= BUSY_BEHIND
    ]


def _runnable(s: Mapping[str, Any]) -> float:
    """The share of the measure phase a process had work: running, or ready and waiting for a CPU."""
    return float(s.get("busy", 0.0)) + float(s.get("waiting_for_cpu", 0.0))


def _unwatched(name: str, s: Mapping[str, Any]) -> str:
    expected = s["window_s"] / SAMPLE_EVERY_S
    return (
        f"harness saturated: {name} sampled itself {s['samples']} time(s) in the {s['window_s']:g} s measure "
        f"phase (about {expected:.0f} expected): it could not even watch itself, let alone keep up"
    )


def _on_message_path(thread: str, path: tuple[str, ...], role: str | None) -> bool:
    if thread == "main" and role == "producer":  # its delays are its send lag, measured per message
        return False
    return bool(path) and thread.startswith(path)


def _starved(thread: Mapping[str, float]) -> bool:
    wait = thread["waiting_for_cpu"]
    return wait >= STARVED_WAIT_SHARE and thread["mean_cpu_wait_us"] >= STARVED_WAIT_US


def describe(workers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per worker for the run's printed report: CPU, busy share, backlog, receive wait."""
    lines = []
    for name, s in sorted(workers.items()):
        if s.get("samples", 0) < 2:
            continue
        busy = "busiest message thread" if s.get("runtime") else "Python busy"
        text = f"{name}: {s['cpu_cores']:.2f} cores, {busy} {s['busy']:.0%}"
        text += f", waiting for a CPU {s['waiting_for_cpu']:.0%}"
        pauses = s.get("pauses") or {}
        if pauses.get("count"):
            text += f", {pauses['count']} pause(s) >= 1 ms, longest {pauses['max_ms']:.1f} ms ({pauses['max_cause']})"
        if s.get("backlog"):
            text += f", backlog median {s['backlog']['messages_p50']:,} max {s['backlog']['messages_max']:,}"
        if s.get("receive_wait_us"):
            text += f", held after arrival p99.9 {s['receive_wait_us']['99.9'] / 1e3:.2f} ms"
        if s.get("dropped"):
            text += f", dropped {s['dropped']:,} from a full queue"
        if (s.get("client_errors") or {}).get("count"):
            text += f", {s['client_errors']['count']:,} client error(s), last {s['client_errors']['last']}"
        lines.append(text)
    return lines
