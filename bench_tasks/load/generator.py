"""The open-loop load generator's worker processes: producers, consumers, rtt responders, service-chain
relays, background-traffic producers and unmeasured (lagging or background) consumers.

Each worker is its own OS process (the GIL must not couple producers) running one precise asyncio loop.
A producer follows its fixed schedule and never waits for the system before the next send: when it is
behind, it sends at once and the message keeps its *intended* time, so latency measured from intended
time is response time, free of coordinated omission. Every timestamp is `now_ns()` taken here, never in the
driver: `time.monotonic_ns()`, or on a cell split over real hosts the host clock (`clock.host_clock`).

Both directions work in batches so one process keeps up with 100,000 messages a second: a producer wakes
when its next message is due and hands the client every message due by then in one driver call, each
stamped as the client takes it (`_open_loop`); a receiver stamps whatever the client handed over together
and decodes the headers of a whole batch at once into preallocated columns (`_ReceivedLog`). Workers stream
progress (counts, fresh latencies, and their own load: `saturation.ProcessWatch`) to the parent every
250 ms, report the measure phase's harness facts before they finish, and write their own Parquet file.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import multiprocessing.synchronize
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from setproctitle import setproctitle

from ..core.saturation import SAMPLE_EVERY_S, ProcessWatch
from ..core.schedule import NS_PER_S, PHASE_NAMES, PhasePlan, stream_offsets_ns
from ..errors import PayloadError
from ..lake.records import RECEIVED_SCHEMA, SENT_SCHEMA, write_parquet, write_parquet_parts
from ..spec.matrix import CELL_ADAPTER, CellSpec
from .driver import Driver, Outgoing, Received
from .drivers import background_spec, driver_for
from .failure import report_failure
from .loop import run_precise, tighten_timer_slack
from .owner import exit_with
from .payload import PayloadFactory, decode_header, decode_headers, decode_relay_stamps, relay, stamp_relay_sent
from .routes import HOP2, MEASURED, background_route

REPORT_EVERY_S = SAMPLE_EVERY_S  # progress reports, and the harness's samples of itself
_MAX_BATCH = 1024  # messages per driver call when behind: the flusher and reporter still run between batches
WAKE_GAP_NS = 500_000  # see _open_loop
_IN_FLIGHT_NS = 200_000  # see _Traffic
_REPORT_WINDOW_S = REPORT_EVERY_S / 4  # a report waits at most this long for a message (_report_soon)
DRAIN_REPORT_S = 0.05  # a listener's reports once the schedule is over (_listening_pause)
_FLUSH_EVERY = 4096  # received messages decoded together (and sooner, see _FLUSH_AFTER_NS)
_FLUSH_AFTER_NS = 100_000_000
# Python threads hand the interpreter lock over every 5 ms by default: a thread woken to stamp a message
# could wait that long for a busy sibling. Workers hand it over 10× sooner.
_SWITCH_INTERVAL_S = 0.0005
# Received messages a relay holds for forwarding at most; a batch beyond it is dropped and counted, which fails
# the cell (the harness lost it). A queue that deep already fails the cell for its backlog before it fills.
RELAY_QUEUE_MESSAGES = 1 << 17
WRITE_ROWS = 1 << 16  # receipts per slice of a receiver's Parquet file (row groups of at most this many rows)
Clock = Callable[[], int]  # a worker's one clock: monotonic, or on a real host the host clock


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker needs; pickled to the child process."""

    role: str  # producer | consumer | responder | relay | laggard | background | bg_consumer
    index: int  # unique per role within the cell
    url: str  # broker address: NATS URL or Kafka bootstrap servers
    cell_id: str
    cell_json: str
    staging_dir: str
    cpus: tuple[int, ...] = ()
    route: str = MEASURED  # which topic/subject a consumer reads (a chain's final consumers read HOP2)
    client: dict[str, Any] = field(default_factory=dict)  # security settings (may be secret: never written down)
    names: str = ""  # the token routes are named from ("": the cell id)
    background: str = ""  # background/bg_consumer: the background workload's name
    part: int = 0  # background: which of the workload's processes this is
    netns: str = ""  # the network namespace of the worker's host ('' = where the parent runs)
    clock_shift_ns: int = 0  # a cell split over real hosts: stamps on the host clock (monotonic + this shift)
    cpu_share: float | None = None  # CPUs of time this worker may use (workload.cpus.*_share); None: unlimited

    def cell(self) -> CellSpec:
        return CELL_ADAPTER.validate_json(self.cell_json)

    def clock(self) -> Clock:
        """The clock every stamp of this worker is read from: on a cell split over real hosts, the host clock."""
        if not self.clock_shift_ns:
            return time.monotonic_ns
        from ..topology.clock import host_clock

        return host_clock(self.clock_shift_ns)


@dataclass
class Channels:
    """Process-shared channels between the parent and its workers."""

    events: Queue
    start_at_ns: Synchronized  # 0 until the parent fixes t0 for every producer
    stop: multiprocessing.synchronize.Event
    phase_ns: tuple[int, int, int]  # warmup, measure, cooldown durations
    owner_pid: int = 0  # the process driving the cell: a worker never outlives it (0: not watched)


def worker_main(plan: WorkerPlan, channels: Channels) -> None:
    """Process entry point. A worker that fails reports it (`failure.report_failure`: one console line, the
    traceback in the cell's log, a `failed` event) and exits 1; SystemExit makes multiprocessing print nothing."""
    try:
        _work(plan, channels)
    except Exception as exc:
        report_failure(plan, channels.events, exc)
        sys.exit(1)


def _work(plan: WorkerPlan, channels: Channels) -> None:
    setproctitle(f"sixnines {plan.role}-{plan.index} cell {plan.cell_id}")  # readable in ps/top
    if channels.owner_pid:
        exit_with(channels.owner_pid)
    if plan.netns:  # first, before any socket exists: everything this worker opens belongs to its host
        from ..topology.netns import enter

        enter(plan.netns)
    if plan.cpus:
        os.sched_setaffinity(0, plan.cpus)
    tighten_timer_slack()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    _warm_arrow()
    role = {
        "producer": _produce,
        "consumer": _consume,
        "responder": _respond,
        "relay": _relay,
        "laggard": _count_consumer,
        "background": _background,
        "bg_consumer": _count_consumer,
    }[plan.role]
    run_precise(role(plan, channels, plan.clock()))


def _warm_arrow() -> None:
    """pyarrow's first conversion of Python objects imports pandas (seconds on a loaded host): pay it during
    setup, before the worker reports ready, not after the schedule when every worker writes its samples."""
    pa.array([None, "warm"], pa.string())


def producer_schedule(cell: CellSpec, index: int, duration_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Intended offsets (ns from t0, sorted) of one producer's messages, and the connection of each."""
    w = cell.workload
    streams = w.producers * w.connections
    parts = [
        stream_offsets_ns(w.rate_per_s, streams, index * w.connections + c, duration_ns, w.arrival, w.seed)
        for c in range(w.connections)
    ]
    offsets = np.concatenate(parts)
    connection = np.concatenate([np.full(p.size, c, dtype=np.int32) for c, p in enumerate(parts)])
    order = np.argsort(offsets, kind="stable")
    return offsets[order], connection[order]


class _Traffic:
    """Lets a worker's reporter run just after a message rather than whenever its timer fires.

    A report (sampling /proc, building and queueing the progress event, which the queue's feeder thread then
    pickles and the parent reads) takes a few hundred microseconds of this process, of the parent and of the
    host's two cores. Run at a random moment, it delays whatever message is on its way meanwhile: at core
    NATS 1 KiB @ 1000/s most reports of the producer delayed the message sent next by 0.2-0.4 ms, and the
    consumer's the one arriving during it; about 20 of the 50 samples above e2e p99 lined up with a report.
    Just after a message the next one is furthest away (a whole interval at a fixed rate), so the work falls
    in the gap. A worker whose message has just left for another process on this host (a producer's publish,
    a responder's echo) waits `_IN_FLIGHT_NS` more, or half the way to its next send if that is sooner, so its
    report does not compete with that message's delivery either (at 1000/s the message's e2e p99 is ~0.2 ms).
    At high rates messages never stop and the reporter goes at once; when none comes it goes when due anyway.
    A report is never skipped, only moved earlier by at most a quarter period (`_report_soon`).

    `passed` is called for every message, in whichever thread the client delivers on: it costs one test
    unless a reporter waits, and then hands the wake-up to the event loop once."""

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.due_s = 0.0  # when the reporter's next report is due (event-loop time; 0: not yet scheduled)

    def passed(self) -> None:
        waiter = self._waiter
        if waiter is not None and self._loop is not None:
            self._waiter = None
            self._loop.call_soon_threadsafe(_release, waiter)

    async def wait(self, timeout_s: float) -> None:
        """Return right after the next message passes, or after `timeout_s` without one."""
        self._loop = asyncio.get_running_loop()
        waiter = self._loop.create_future()
        self._waiter = waiter
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            self._waiter = None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _report_soon(traffic: _Traffic, in_flight_ns: Callable[[], int] | None = None) -> None:
    """A reporter's pause until its next report is due (every `REPORT_EVERY_S`), taken just after the first
    message of the last `_REPORT_WINDOW_S` before then (`_Traffic`) and, when that message has just left for
    another process, `in_flight_ns()` more. Reports stay `REPORT_EVERY_S` apart on average and at most
    1.25 periods apart, so a one-second measure phase still holds three self-samples (`saturation`)."""
    loop = asyncio.get_running_loop()
    due = traffic.due_s = (
        max(traffic.due_s + REPORT_EVERY_S, loop.time()) if traffic.due_s else loop.time() + REPORT_EVERY_S
    )
    await asyncio.sleep(max(0.0, due - _REPORT_WINDOW_S - loop.time()))
    await traffic.wait(max(0.0, due - loop.time()))
    settle_ns = in_flight_ns() if in_flight_ns is not None else 0
    if settle_ns > 0:
        await asyncio.sleep(settle_ns * 1e-9)


async def _listening_pause(
    traffic: _Traffic, channels: Channels, now_ns: Clock, in_flight_ns: Callable[[], int] | None = None
) -> None:
    """A listener's pause before its next report: `_report_soon` while the schedule runs, `DRAIN_REPORT_S` once
    it is over (t0 plus every phase). The parent's drain ends when the reports count every sent message, and a
    listener ends at the first look at `stop` after it: at a report period each, that was 0.3-0.45 s of every
    cell's wall after its cooldown. What still arrives then was sent a cooldown or more before, so the few tens
    of microseconds of a report no longer matter beside its latency."""
    t0 = int(channels.start_at_ns.value)
    if t0 and now_ns() >= t0 + sum(channels.phase_ns):
        await asyncio.sleep(DRAIN_REPORT_S)
    else:
        await _report_soon(traffic, in_flight_ns)


def _fixed_in_flight() -> int:
    return _IN_FLIGHT_NS


class _SentLog:
    """Preallocated per-message arrays of one producer: the hot path only assigns into them."""

    def __init__(self, intended: np.ndarray, clock: Clock):
        n = intended.size
        self.clock = clock
        self.intended = intended
        self.sent = np.full(n, -1, dtype=np.int64)
        self.acked = np.full(n, -1, dtype=np.int64)
        self.partition = np.full(n, -1, dtype=np.int32)
        self.offset = np.full(n, -1, dtype=np.int64)
        self.errors: dict[int, str] = {}
        self.attempted = 0
        self.fresh_sends: list[tuple[int, int]] = []  # seq ranges [start, end) sent since the last report
        self.fresh_acks: list[int] = []  # seqs acked since the last report
        self.acked_count = 0
        self.traffic = _Traffic()  # the reporter goes right after a send (or an rtt reply)

    def on_ack(self, seq: int, partition: int | None, offset: int | None, error: str | None) -> None:
        if error is None:
            self.acked[seq] = self.clock()
            self.partition[seq] = -1 if partition is None else partition
            self.offset[seq] = -1 if offset is None else offset
            self.acked_count += 1
            self.fresh_acks.append(seq)
        else:
            self.errors[seq] = error

    def replied(self, seq: int, at_ns: int) -> None:
        """An rtt reply that reached the process at `at_ns`."""
        self.acked[seq] = at_ns
        self.acked_count += 1
        self.fresh_acks.append(seq)

    def stamped(self, messages: Iterator[tuple[int, int, bytes]], stream: int = 0) -> Outgoing:
        """Record each message's send time as the driver pulls it (the clock was read right then)."""
        sent = self.sent
        for seq, sent_ns, message in messages:
            sent[seq] = sent_ns
            yield seq, stream, message

    def refused(self, refused: dict[int, str]) -> None:
        """Messages the client never took: not sent, with the client's reason."""
        for seq, error in refused.items():
            self.sent[seq] = -1
            self.errors[seq] = error

    def table(self, producer_id: int, plan: PhasePlan) -> pa.Table:
        n = self.intended.size
        error = [None] * n
        for seq, text in self.errors.items():
            error[seq] = text
        phases = np.array(PHASE_NAMES, dtype=object)[plan.phases_of(self.intended)]
        return pa.table(
            {
                "producer_id": pa.array(np.full(n, producer_id, dtype=np.int32)),
                "seq": pa.array(np.arange(n, dtype=np.int64)),
                "intended_ns": pa.array(self.intended),
                "sent_ns": pa.array(self.sent, mask=self.sent < 0),
                "acked_ns": pa.array(self.acked, mask=self.acked < 0),
                "partition": pa.array(self.partition, mask=self.partition < 0),
                "offset": pa.array(self.offset, mask=self.offset < 0),
                "phase": pa.array(phases, pa.string()),
                "error": pa.array(error, pa.string()),
            },
            schema=SENT_SCHEMA,
        )


def _freeze_setup_heap() -> None:
    """Everything allocated during setup lives for the whole cell: move it out of the collector's sight so
    a full collection during the schedule scans only what the schedule itself allocates."""
    gc.collect()
    gc.freeze()


def _ready(plan: WorkerPlan, channels: Channels, **facts: Any) -> None:
    """Setup is over: freeze its heap, take on the worker's CPU share if it has one, and say so. The share
    models what a smaller generator host sustains, so it starts here, not at the process's start: a heap freeze
    and a connection cost ~0.1 s of CPU, which at 1 % of a CPU would fill a cell's start with 10 s of setup
    (and on a slower host outlast the parent's readiness timeout) before the load it is meant to starve."""
    _freeze_setup_heap()
    if plan.cpu_share is not None:
        from .cpushare import confine

        confine(f"{plan.cell_id}-{plan.role}-{plan.index}", plan.cpu_share)
    channels.events.put({"kind": "ready", "role": plan.role, "index": plan.index, **facts})


async def _wait_for_start(channels: Channels) -> int:
    while channels.start_at_ns.value == 0:
        if channels.stop.is_set():
            raise RuntimeError("stopped before start")
        await asyncio.sleep(0.005)
    return int(channels.start_at_ns.value)


def _phase_plan(t0: int, channels: Channels) -> PhasePlan:
    return PhasePlan(t0, *channels.phase_ns)


def _worker_name(plan: WorkerPlan) -> str:
    """How the cell's harness facts and failure reasons name a worker: `producer p0`, `consumer c1`, …"""
    prefix = {"producer": "p", "consumer": "c", "relay": "r", "responder": "s", "laggard": "l"}.get(plan.role, "b")
    return f"{plan.role} {prefix}{plan.index}"


def _report_harness(
    plan: WorkerPlan,
    channels: Channels,
    watch: ProcessWatch,
    t0: int,
    drivers: Sequence[Driver],
    extra: dict | None = None,
    dropped: int = 0,
) -> None:
    """The measure phase of this process as the harness saw itself (`saturation`), for the cell's record,
    with what its clients reported beside their messages and what it dropped (`dropped`: its own queue's)."""
    warmup, measure, _ = channels.phase_ns
    limit_ms = plan.cell().workload.max_schedule_lag_ms
    summary = watch.summary((t0 + warmup, t0 + warmup + measure), limit_ms) if t0 else {"samples": 0}
    summary |= extra or {}
    summary |= client_facts(drivers, dropped)
    channels.events.put(
        {"kind": "harness", "role": plan.role, "index": plan.index, "name": _worker_name(plan), "summary": summary}
    )


def client_facts(drivers: Sequence[Driver], dropped: int = 0) -> dict[str, Any]:
    """The worker's clients' errors (load.driver.ClientErrors) added up, and every message dropped from a full
    queue inside the harness: the clients' (a slow consumer's) and `dropped`, the worker's own."""
    kinds: dict[str, int] = {}
    last = None
    for driver in drivers:
        for kind, n in driver.errors.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
        last = driver.errors.last or last
        dropped += driver.errors.dropped
    return {"client_errors": {"count": sum(kinds.values()), "kinds": kinds, "last": last}, "dropped": dropped}


async def _produce(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    w = cell.workload
    duration_ns = sum(channels.phase_ns)
    offsets, connection_of = producer_schedule(cell, plan.index, duration_ns)
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, plan.client)
    arrivals = _Arrivals(now_ns)
    if cell.measurement == "rtt":  # a reply is stamped when it reaches the process, like any receipt
        driver.watch_arrivals(arrivals.mark)
    connections = await driver.open_producer(f"sixnines-p{plan.index}", w.connections)
    factory = PayloadFactory(w.message_size_bytes)
    _ready(plan, channels, messages=offsets.size)
    t0 = await _wait_for_start(channels)
    log = _SentLog(offsets + t0, now_ns)
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    # An rtt requester reports after a reply: nothing of its own is then on its way.
    in_flight = None if cell.measurement == "rtt" else functools.partial(_until_delivered, log)
    reporter = asyncio.create_task(_report_producer(plan, channels, log, driver, watch, in_flight))
    try:
        if cell.measurement == "rtt":
            loops = (
                _request_loop(driver, nc, log, factory, np.flatnonzero(connection_of == c), arrivals, plan.index, w)
                for c, nc in enumerate(connections)
            )
            await _until_stopped(channels, asyncio.gather(*loops))
        else:
            await _until_stopped(channels, _publish_loop(driver, connections[0], log, factory, plan.index))
            await _await_acks(driver, log, deadline_ns=now_ns() + int(w.request_timeout_s * NS_PER_S))
    finally:  # whatever happened, what was sent is written down: nothing is lost when something fails
        reporter.cancel()
        await driver.close()
        write_parquet(
            log.table(plan.index, _phase_plan(t0, channels)),
            Path(plan.staging_dir) / f"sent-p{plan.index}.parquet",
        )
    _send_progress(plan, channels, log)
    _report_harness(plan, channels, watch, t0, [driver])
    channels.events.put({"kind": "done", "role": "producer", "index": plan.index})


async def _until_stopped(channels: Channels, work: Awaitable[Any], poll_s: float = 0.05) -> None:
    """Run `work` until it ends or the parent sets `stop` (a cell cut off because its schedule could not end in
    time): then it is cancelled, and the caller's `finally` still writes down everything sent so far, instead of
    the process being terminated with its samples unwritten. It looks at `stop` every `poll_s` rather than
    waiting on it in a thread: a process that exits while one of its threads sleeps in a multiprocessing Event's
    wait leaves the Event's condition counting a sleeper that never wakes, and the parent's `stop.set()` then
    fails (`notify: Should not have been able to acquire _wait_semaphore`)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        if channels.stop.is_set():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return
        await asyncio.wait({task}, timeout=poll_s)
    task.result()


async def _open_loop(intended: np.ndarray, send: Callable[[int, int], Awaitable[None]], now_ns: Clock) -> None:
    """The open loop over a sorted schedule: sleep until the next message is due (never past it), then send
    every message due by now in one batch, `send(start, end)`. Behind schedule, batches follow each other
    at once, yielding in between so the client's flusher and the reporter run; nothing waits for the system.

    A wake-up costs tens of microseconds whatever it sends, so at rates whose messages are closer together
    than `WAKE_GAP_NS` the loop wakes at most once per gap and sends everything due by then: a message may
    leave up to that much after its intended time (recorded as send lag, part of response time like any
    other harness delay; service time is untouched). Slower schedules wake for every message exactly."""
    n, start, woke = intended.size, 0, 0
    while start < n:
        now = now_ns()
        wake = max(int(intended[start]), woke + WAKE_GAP_NS)
        await asyncio.sleep((wake - now) * 1e-9 if wake > now else 0)
        woke = now_ns()
        due = int(np.searchsorted(intended, woke, side="right"))
        end = min(max(due, start + 1), start + _MAX_BATCH, n)
        await send(start, end)
        start = end


async def _publish_loop(driver: Driver, nc: Any, log: _SentLog, factory: PayloadFactory, pid: int) -> None:
    """The producer's open loop: each batch built and stamped as the driver hands it to the client."""
    intended = log.intended

    async def send(start: int, end: int) -> None:
        batch = factory.batch(pid, range(start, end), intended[start:end].tolist(), log.clock)
        log.refused(await driver.send_batch(nc, log.stamped(batch), log.on_ack))
        log.fresh_sends.append((start, end))
        log.attempted = end
        log.traffic.passed()

    await _open_loop(intended, send, log.clock)


async def _await_acks(driver: Driver, log: _SentLog, deadline_ns: int) -> None:
    """Wait for outstanding acks; what has not arrived by the deadline counts as unacked."""
    if not driver.acks:
        return
    while log.acked_count + len(log.errors) < log.attempted and log.clock() < deadline_ns:
        await asyncio.sleep(0.01)


async def _request_loop(
    driver: Driver,
    nc: Any,
    log: _SentLog,
    factory: PayloadFactory,
    seqs: np.ndarray,
    arrivals: _Arrivals,
    pid: int,
    w: Any,
) -> None:
    """One synchronous rtt connection: a request cannot leave before the previous reply, but its
    latency is still measured from its intended time (wrk2's correction)."""
    now_ns = log.clock
    for seq in seqs.tolist():
        due = int(log.intended[seq])
        message = factory.prepare(pid, seq, due)
        delay = due - now_ns()
        if delay > 0:
            await asyncio.sleep(delay * 1e-9)
        sent = now_ns()
        log.sent[seq] = sent
        log.fresh_sends.append((seq, seq + 1))
        log.attempted += 1
        try:
            await driver.request(nc, factory.stamp(message, sent), w.request_timeout_s)
            log.replied(seq, arrivals.stamp(now_ns()))
        except Exception as exc:
            log.errors[seq] = type(exc).__name__
        log.traffic.passed()


def _until_delivered(log: _SentLog) -> int:
    """How long a producer's report waits after a send (`_Traffic`): `_IN_FLIGHT_NS`, or half the way to the
    next send when that is sooner (none at high rates)."""
    if log.attempted >= log.intended.size:
        return 0
    gap_ns = int(log.intended[log.attempted]) - log.clock()
    return int(min(gap_ns // 2, _IN_FLIGHT_NS))


def _send_progress(plan: WorkerPlan, channels: Channels, log: _SentLog) -> None:
    sends, log.fresh_sends = log.fresh_sends, []
    acks, log.fresh_acks = log.fresh_acks, []
    lag_idx = _seq_ranges(sends)
    lag_idx = lag_idx[log.sent[lag_idx] >= 0]  # refused messages have no send time
    ack_idx = np.asarray(acks, dtype=np.int64)
    channels.events.put(
        {
            "kind": "progress",
            "role": "producer",
            "index": plan.index,
            "attempted": log.attempted,
            "acked": log.acked_count,
            "errors": len(log.errors),
            "lag_ns": log.sent[lag_idx] - log.intended[lag_idx],
            "ack_intended_ns": log.acked[ack_idx] - log.intended[ack_idx],
            "ack_sent_ns": log.acked[ack_idx] - log.sent[ack_idx],
            "ack_at_ns": log.intended[ack_idx],
        }
    )


def _seq_ranges(ranges: list[tuple[int, int]]) -> np.ndarray:
    """The seqs of [start, end) ranges; one arange when they follow each other (the open loop's batches)."""
    if not ranges:
        return np.empty(0, np.int64)
    if all(b[0] == a[1] for a, b in itertools.pairwise(ranges)):
        return np.arange(ranges[0][0], ranges[-1][1])
    return np.concatenate([np.arange(a, b) for a, b in ranges])


async def _report_producer(
    plan: WorkerPlan,
    channels: Channels,
    log: _SentLog,
    driver: Driver,
    watch: ProcessWatch,
    in_flight: Callable[[], int] | None,
) -> None:
    while True:
        await _report_soon(log.traffic, in_flight)
        watch.sample(driver.backlog(), log.attempted)
        _send_progress(plan, channels, log)


_RECEIVED_FIELDS = (
    "pid",
    "seq",
    "intended",
    "sent",
    "received",
    "partition",
    "offset",
    "hop",
    "relay_received",
    "relay_sent",
    "handed",  # when the client handed the message over (not landed: the harness facts summarise it)
)
_COLUMN = {name: i for i, name in enumerate(_RECEIVED_FIELDS)}


class _Arrivals:
    """When bytes last reached this process's clients from the network. Drivers that can tell (nats-py's
    reads) call `mark` before the client parses them; a receipt is then stamped at that moment, which is
    never earlier than its own bytes' arrival (they were read before it was handed over) and never later
    than its hand-over. Where the client cannot tell (librdkafka), a receipt is stamped at its hand-over."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last_ns = 0

    def mark(self) -> None:
        self.last_ns = self.clock()

    def stamp(self, handed_ns: int) -> int:
        return self.last_ns or handed_ns


class _ReceivedLog:
    """Every receipt of one receiver, as int64 columns in fixed-size blocks (no Python object per message).

    `on_messages` is the driver's callback: it stamps the hand-over (and takes the arrival stamp) first, then
    keeps the batch's payloads until enough have gathered to decode their headers in one numpy view
    (`flush`). The blocks for the receipts the schedule promises (`expected`) are allocated, and their pages
    touched, before the schedule starts; more are added one block at a time, so growing never copies what
    is already there (a doubling array would stall the receiver for a copy of everything it holds). Only the
    receiving thread writes; the reporter, in another thread with Kafka, reads `count` first and the
    columns after, so it never sees a row being written."""

    BLOCK = 1 << 16

    def __init__(self, clock: Clock, expected: int = 0) -> None:
        self.clock = clock
        self.blocks = [self._block() for _ in range(max(1, -(-expected // self.BLOCK)))]
        self.count = 0
        self.reported = 0
        self.bad = 0
        self.arrivals = _Arrivals(clock)
        self.traffic = _Traffic()  # the reporter goes right after a hand-over
        self._chunks: list[tuple[int, int, Sequence[bytes], Sequence[int] | None, Sequence[int] | None]] = []
        self._gathered = 0

    def on_messages(self, batch: Received) -> None:
        handed = self.clock()
        payloads = batch.payloads()
        self._chunks.append((self.arrivals.stamp(handed), handed, payloads, batch.partitions(), batch.offsets()))
        self._gathered += len(payloads)
        if self._gathered >= _FLUSH_EVERY or handed - self._chunks[0][1] >= _FLUSH_AFTER_NS:
            self.flush()
        self.traffic.passed()

    @property
    def handed(self) -> int:
        return self.count + self._gathered

    def flush(self) -> None:
        """Decode the gathered payloads into the columns (receiving thread, or after the client closed)."""
        chunks, self._chunks, self._gathered = self._chunks, [], 0
        if not chunks:
            return
        payloads = [p for c in chunks for p in c[2]]
        counts = np.fromiter((len(c[2]) for c in chunks), dtype=np.int64, count=len(chunks))
        headers, ours = decode_headers(payloads)
        self.bad += int(ours.size - ours.sum())
        block = np.empty((len(_RECEIVED_FIELDS), int(ours.sum())), dtype=np.int64)
        for name, field_ in (("pid", "producer_id"), ("seq", "seq"), ("intended", "intended_ns"), ("sent", "sent_ns")):
            block[_COLUMN[name]] = headers[field_][ours]
        for name, at in (("received", 0), ("handed", 1)):
            stamps = np.fromiter((c[at] for c in chunks), dtype=np.int64, count=len(chunks))
            block[_COLUMN[name]] = np.repeat(stamps, counts)[ours]
        block[_COLUMN["partition"]] = _flatten([(c[3], len(c[2])) for c in chunks])[ours]
        block[_COLUMN["offset"]] = _flatten([(c[4], len(c[2])) for c in chunks])[ours]
        hop = headers["hop"][ours].astype(np.int64)
        block[_COLUMN["hop"]] = np.where(hop > 0, hop + 1, 0)  # the chain's final hop (2), or 0 outside a chain
        block[_COLUMN["relay_received"] : _COLUMN["relay_sent"] + 1] = -1
        if hop.any():
            relayed = np.flatnonzero(hop > 0)
            kept = [p for p, mine in zip(payloads, ours, strict=True) if mine]
            stamps_ = decode_relay_stamps([kept[i] for i in relayed])
            block[_COLUMN["relay_received"], relayed] = stamps_[:, 0]
            block[_COLUMN["relay_sent"], relayed] = stamps_[:, 1]
        self.append(block)

    def waits_us(self, window_ns: tuple[int, int]) -> dict[str, float] | None:
        """How long messages intended in `window_ns` waited inside the harness, from arrival to hand-over;
        None where the client never signalled an arrival (librdkafka: receipts are stamped at hand-over)."""
        if not self.arrivals.last_ns:
            return None
        c = self.columns()
        inside = (c["intended"] >= window_ns[0]) & (c["intended"] < window_ns[1]) & (c["handed"] >= 0)
        waits = (c["handed"] - c["received"])[inside] / 1e3
        if waits.size == 0:
            return None
        q = {p: round(float(np.percentile(waits, float(p), method="inverted_cdf")), 1) for p in ("50", "99", "99.9")}
        return {**q, "max": round(float(waits.max()), 1), "count": int(waits.size)}

    def _block(self) -> np.ndarray:
        return np.full((len(_RECEIVED_FIELDS), self.BLOCK), -1, dtype=np.int64)

    def append(self, rows: np.ndarray) -> None:
        start, end = self.count, self.count + rows.shape[1]
        while end > len(self.blocks) * self.BLOCK:
            self.blocks.append(self._block())
        at = start
        while at < end:
            block, offset = divmod(at, self.BLOCK)
            n = min(end - at, self.BLOCK - offset)
            self.blocks[block][:, offset : offset + n] = rows[:, at - start : at - start + n]
            at += n
        self.count = end

    def columns(self, start: int = 0, end: int | None = None) -> dict[str, np.ndarray]:
        """Rows [start, end) by column name (copies of just those rows)."""
        end = self.count if end is None else end
        blocks = self.blocks[:]  # a block appended meanwhile holds only rows beyond `end`
        parts = [
            blocks[b][:, max(start, b * self.BLOCK) - b * self.BLOCK : min(end, (b + 1) * self.BLOCK) - b * self.BLOCK]
            for b in range(start // self.BLOCK, -(-end // self.BLOCK))
        ]
        data = np.concatenate(parts, axis=1) if parts else blocks[0][:, :0]
        return {name: data[i] for i, name in enumerate(_RECEIVED_FIELDS)}

    def table(self, consumer_id: int, plan: PhasePlan, start: int = 0, end: int | None = None) -> pa.Table:
        """Rows [start, end) as the received-samples table (all of them by default)."""
        c = self.columns(start, end)
        n = c["seq"].size
        phases = np.array(PHASE_NAMES, dtype=object)[plan.phases_of(c["intended"])]
        return pa.table(
            {
                "consumer_id": pa.array(np.full(n, consumer_id, dtype=np.int32)),
                "producer_id": pa.array(c["pid"].astype(np.int32)),
                "seq": pa.array(c["seq"]),
                "intended_ns": pa.array(c["intended"]),
                "sent_ns": pa.array(c["sent"]),
                "received_ns": pa.array(c["received"]),
                "partition": pa.array(c["partition"].astype(np.int32), mask=c["partition"] < 0),
                "offset": pa.array(c["offset"], mask=c["offset"] < 0),
                "leader": pa.nulls(n, pa.int32()),  # attributed from the leader timeline when the cell lands
                "hop": pa.array(c["hop"].astype(np.int8)),
                "relay_received_ns": pa.array(c["relay_received"], mask=c["relay_received"] < 0),
                "relay_sent_ns": pa.array(c["relay_sent"], mask=c["relay_sent"] < 0),
                "phase": pa.array(phases, pa.string()),
            },
            schema=RECEIVED_SCHEMA,
        )

    def write(self, consumer_id: int, plan: PhasePlan, path: Path) -> None:
        """The receiver's Parquet file, `WRITE_ROWS` rows at a time: writing holds one slice beside the log,
        never a second (and third, as Arrow columns) copy of every receipt (bench/receiver_memory.py)."""
        starts = range(0, self.count, WRITE_ROWS) if self.count else (0,)
        parts = (self.table(consumer_id, plan, at, min(at + WRITE_ROWS, self.count)) for at in starts)
        write_parquet_parts(RECEIVED_SCHEMA, parts, path)


def _expected_receipts(cell: CellSpec, duration_ns: int) -> int:
    """About how many messages one of the cell's receivers gets over the whole schedule (its share, plus a
    tenth for an uneven share), so their storage can be allocated before the schedule starts."""
    w = cell.workload
    return int(w.rate_per_s * duration_ns / NS_PER_S / max(1, w.consumers) * 1.1) + 1


def _flatten(parts: list[tuple[Sequence[int] | None, int]]) -> np.ndarray:
    """Per-message values of many hand-overs as one int64 array; a hand-over without them gives -1s."""
    total = sum(n for _, n in parts)
    if all(values is None for values, _ in parts):
        return np.full(total, -1, dtype=np.int64)
    flat = [v for values, n in parts for v in (values if values is not None else (-1,) * n)]
    return np.asarray(flat, dtype=np.int64)


def _consumer_progress(plan: WorkerPlan, channels: Channels, log: _ReceivedLog) -> None:
    """The latencies of the rows decoded since the last report, and how many messages the client has handed
    over: `received` counts the gathered tail too, or the drain (which waits until every sent message is
    received) would wait out its whole timeout for the last few, not yet decoded, after every schedule."""
    handed = log.handed
    end = log.count  # first: rows below it are complete
    start, log.reported = log.reported, end
    c = log.columns(start, end)
    channels.events.put(
        {
            "kind": "progress",
            "role": "consumer",
            "index": plan.index,
            "received": max(handed, end),
            "bad": log.bad,
            "e2e_intended_ns": c["received"] - c["intended"],
            "e2e_sent_ns": c["received"] - c["sent"],
            "e2e_at_ns": c["intended"].copy(),
        }
    )


async def _consume(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, client=plan.client)
    log = _ReceivedLog(now_ns, expected=_expected_receipts(cell, sum(channels.phase_ns)))
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    driver.watch_arrivals(log.arrivals.mark)
    await driver.open_consumer(f"sixnines-c{plan.index}", log.on_messages)
    _ready(plan, channels)
    while not channels.stop.is_set():
        await _listening_pause(log.traffic, channels, now_ns)
        watch.sample(driver.backlog(), log.handed)
        _consumer_progress(plan, channels, log)
    await driver.close()
    log.flush()  # the client is closed: nothing else writes now
    t0 = int(channels.start_at_ns.value)
    log.write(plan.index, _phase_plan(t0, channels), Path(plan.staging_dir) / f"received-c{plan.index}.parquet")
    _consumer_progress(plan, channels, log)
    warmup, measure, _ = channels.phase_ns
    waits = log.waits_us((t0 + warmup, t0 + warmup + measure))
    _report_harness(plan, channels, watch, t0, [driver], {"receive_wait_us": waits})
    channels.events.put({"kind": "done", "role": "consumer", "index": plan.index})


async def _count_consumer(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """An unmeasured consumer, counted but never timed: a lagging one reads the measured topic's backlog
    from its oldest message (seed 003); a background one reads its background workload (seed 004)."""
    cell = plan.cell()
    if plan.role == "bg_consumer":
        spec, route = background_spec(cell, cell.background[plan.background]), background_route(plan.background)
    else:
        spec, route = cell, MEASURED
    driver = driver_for(plan.url, spec, plan.names or plan.cell_id, route, client=plan.client)
    consumed = [0]
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)

    def count(batch: Received) -> None:
        consumed[0] += len(batch.payloads())

    name = f"sixnines-{'l' if plan.role == 'laggard' else 'bgc'}{plan.index}"
    await driver.open_consumer(name, count, lagging=plan.role == "laggard")
    _ready(plan, channels)

    def progress() -> None:
        channels.events.put(
            {
                "kind": "progress",
                "role": plan.role,
                "index": plan.index,
                "background": plan.background,
                "consumed": consumed[0],
            }
        )

    while not channels.stop.is_set():
        await asyncio.sleep(REPORT_EVERY_S)
        watch.sample(driver.backlog(), consumed[0])
        progress()
    await driver.close()
    progress()
    _report_harness(plan, channels, watch, int(channels.start_at_ns.value), [driver])
    channels.events.put({"kind": "done", "role": plan.role, "index": plan.index})


async def _relay(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """The service of a two-hop chain (seed 002): consume the first topic, forward each message to the
    second with the producer's header untouched (so the final consumer still measures from the original
    intended time) and this relay's receive and send times stamped in. Its own receipts land as hop-1 rows
    in relayed-r<i>.parquet, so a loss can be placed on the hop where it happened."""
    cell = plan.cell()
    inbound = driver_for(plan.url, cell, plan.names or plan.cell_id, MEASURED, client=plan.client)
    outbound = driver_for(plan.url, cell, plan.names or plan.cell_id, HOP2, client=plan.client)
    (conn,) = await outbound.open_producer(f"sixnines-relay{plan.index}", 1)
    waiting = _RelayQueue(asyncio.get_running_loop(), RELAY_QUEUE_MESSAGES)
    relaying = _Relaying(outbound, conn, now_ns)
    watch = ProcessWatch(clock=now_ns, message_threads=(*inbound.message_threads, *outbound.message_threads))
    stamps = _Arrivals(now_ns)
    inbound.watch_arrivals(stamps.mark)

    def on_messages(batch: Received) -> None:
        received = stamps.stamp(now_ns())  # the hop-1 arrival, in whichever thread the client delivers on
        waiting.offer(received, batch)

    async def forward() -> None:
        while True:
            await relaying.forward(*await waiting.get())

    def progress() -> None:
        counts = {**relaying.counts(), "dropped": waiting.dropped}
        channels.events.put({"kind": "progress", "role": "relay", "index": plan.index, **counts})

    forwarder = asyncio.create_task(forward())
    await inbound.open_consumer(f"sixnines-r{plan.index}", on_messages)
    _ready(plan, channels)
    try:
        while not channels.stop.is_set():
            await asyncio.sleep(REPORT_EVERY_S)
            if forwarder.done():  # it only ends by failing: surface why, or nothing would be relayed silently
                forwarder.result()
            watch.sample(inbound.backlog(), relaying.log.count + waiting.held)
            progress()
        await inbound.close()
        while not waiting.empty() and not forwarder.done():  # forward what had already arrived
            await asyncio.sleep(0.01)
        forwarder.cancel()
        await outbound.close()
    finally:
        t0 = int(channels.start_at_ns.value)
        relaying.log.write(
            plan.index, _phase_plan(t0, channels), Path(plan.staging_dir) / f"relayed-r{plan.index}.parquet"
        )
    progress()
    _report_harness(plan, channels, watch, t0, [inbound, outbound], dropped=waiting.dropped)
    channels.events.put({"kind": "done", "role": "relay", "index": plan.index})


class _RelayQueue:
    """Received batches waiting for the relay's forwarder, kept on its event loop: at most `limit` messages.
    A batch that does not fit is dropped and counted (`dropped`: the cell fails, the harness lost them), so a
    forwarder that falls behind never grows the queue without end. `offer` may be called from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int):
        self.loop, self.limit = loop, limit
        self.held = self.dropped = 0
        self._queue: asyncio.Queue[tuple[int, Received, int]] = asyncio.Queue()

    def offer(self, received: int, batch: Received) -> None:
        self.loop.call_soon_threadsafe(self._put, received, batch)

    def _put(self, received: int, batch: Received) -> None:
        n = len(batch.payloads())
        if self.held + n > self.limit:
            self.dropped += n
            return
        self.held += n
        self._queue.put_nowait((received, batch, n))

    async def get(self) -> tuple[int, Received]:
        received, batch, n = await self._queue.get()
        self.held -= n
        return received, batch

    def empty(self) -> bool:
        return self._queue.empty()


class _Relaying:
    """A relay's forwarding: each received batch goes on to the second hop, every message with the relay's
    receive time written in and its send time stamped as the client takes it; its hop-1 rows are logged."""

    def __init__(self, outbound: Driver, conn: Any, clock: Clock):
        self.outbound, self.conn, self.clock = outbound, conn, clock
        self.log = _ReceivedLog(clock)
        self.relayed = self.forward_errors = 0

    def counts(self) -> dict[str, int]:
        return {"relayed": self.relayed, "forward_errors": self.forward_errors, "bad": self.log.bad}

    def on_forward_ack(self, _seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        if error is not None:
            self.forward_errors += 1

    async def forward(self, received: int, batch: Received) -> None:
        payloads = batch.payloads()
        partitions, offsets = batch.partitions(), batch.offsets()
        rows: list[list[int]] = []  # _RECEIVED_FIELDS; relay_sent (index 9) filled in once the client took it
        sent: dict[int, int] = {}

        def outgoing() -> Outgoing:
            for k, data in enumerate(payloads):
                try:
                    h = decode_header(data)
                    message = relay(data, received)
                except PayloadError:
                    self.log.bad += 1
                    continue
                part = -1 if partitions is None else partitions[k]
                off = -1 if offsets is None else offsets[k]
                rows.append(
                    [h.producer_id, h.seq, h.intended_ns, h.sent_ns, received, part, off, 1, received, -1, received]
                )
                sent[len(rows) - 1] = self.clock()
                yield len(rows) - 1, 0, stamp_relay_sent(message, sent[len(rows) - 1])

        refused = await self.outbound.send_batch(self.conn, outgoing(), self.on_forward_ack)
        for row, stamp in sent.items():
            rows[row][_COLUMN["relay_sent"]] = -1 if row in refused else stamp
        self.forward_errors += len(refused)
        self.relayed += len(rows)
        if rows:
            self.log.append(np.array(rows, dtype=np.int64).T)


async def _background(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """Some of a background workload's logical producers, multiplexed on one loop and one client: each
    keeps its own fixed-rate schedule (interleaved with the others, as independent producers would be) and,
    with per-producer keys, its own key. Open loop like the measured producers; counted, never timed."""
    cell = plan.cell()
    bg = cell.background[plan.background]
    route = background_route(plan.background)
    driver = driver_for(plan.url, background_spec(cell, bg), plan.names or plan.cell_id, route, client=plan.client)
    offsets, stream_of = _background_schedule(cell, plan, sum(channels.phase_ns))
    (conn,) = await driver.open_producer(f"sixnines-bg-{plan.background}-{plan.part}", 1)
    factory = PayloadFactory(bg.message_size_bytes)
    counts = {"scheduled": int(offsets.size), "sent": 0, "acked": 0, "errors": 0}
    lag = np.full(offsets.size, -1, dtype=np.int64)

    def on_ack(_seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        counts["acked" if error is None else "errors"] += 1

    def progress(kind: str = "progress") -> None:
        event = {"kind": kind, "role": "background", "index": plan.index, "background": plan.background, **counts}
        if kind == "done":
            event["lag_ns"] = lag[lag >= 0]
        channels.events.put(event)

    _ready(plan, channels, messages=offsets.size)
    t0 = await _wait_for_start(channels)
    intended = offsets + t0
    next_report = [now_ns() + int(REPORT_EVERY_S * NS_PER_S)]

    def stamped(start: int, end: int) -> Outgoing:
        """Each stream's messages carry its own id in the header and key; lag recorded as each one leaves."""
        for n in range(start, end):
            stream = int(stream_of[n])
            (_, sent, message) = next(factory.batch(stream, (n,), (int(intended[n]),), now_ns))
            lag[n] = sent - int(intended[n])
            yield n, stream, message

    async def send(start: int, end: int) -> None:
        refused = await driver.send_batch(conn, stamped(start, end), on_ack)
        lag[list(refused)] = -1
        counts["sent"] += end - start - len(refused)
        counts["errors"] += len(refused)
        if now_ns() >= next_report[0]:
            progress()
            next_report[0] = now_ns() + int(REPORT_EVERY_S * NS_PER_S)

    try:
        await _open_loop(intended, send, now_ns)
        deadline = now_ns() + int(cell.workload.request_timeout_s * NS_PER_S)
        while driver.acks and counts["acked"] + counts["errors"] < counts["scheduled"] and now_ns() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await driver.close()
    progress("done")


def _background_schedule(cell: CellSpec, plan: WorkerPlan, duration_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Intended offsets (sorted) of this background process's messages, and the logical producer of each."""
    bg = cell.background[plan.background]
    mine = range(plan.part, bg.producers, bg.processes)
    parts = [
        stream_offsets_ns(bg.rate_per_s, bg.producers, i, duration_ns, bg.arrival, cell.workload.seed) for i in mine
    ]
    offsets = np.concatenate(parts)
    stream_of = np.concatenate([np.full(p.size, i, dtype=np.int32) for i, p in zip(mine, parts, strict=True)])
    order = np.argsort(offsets, kind="stable")
    return offsets[order], stream_of[order]


async def _respond(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, client=plan.client)
    served = [0]
    traffic = _Traffic()

    def count() -> None:
        served[0] += 1
        traffic.passed()

    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    await driver.open_responder(f"sixnines-r{plan.index}", count)
    _ready(plan, channels)
    while not channels.stop.is_set():
        await _listening_pause(traffic, channels, now_ns, _fixed_in_flight)  # its echo has just left
        watch.sample(driver.backlog(), served[0])
        channels.events.put({"kind": "progress", "role": "responder", "index": plan.index, "served": served[0]})
    await driver.close()
    _report_harness(plan, channels, watch, int(channels.start_at_ns.value), [driver])
    channels.events.put({"kind": "done", "role": "responder", "index": plan.index})
