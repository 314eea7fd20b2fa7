"""Watching one phase of a running cell from outside the generator (Airflow's warmup/measure/cooldown tasks).

Phase boundaries come from the schedule's t0 in the generator's status file, on CLOCK_MONOTONIC, which every
process on the host shares; when a watcher task happened to start does not matter. A watcher fails the cell
(and records why in `verdict-<phase>.json`, for `land`) when the generator dies, stops reporting or reports
a failure, when a broker dies that no planned fault killed (its node: the generator's own broker watch, when
it saw it first, says how and when), or when the generator has fallen behind its
schedule: during measure, the send lag p99.9 of each of `SUSTAINED_S` consecutive seconds above the cell's
`max_schedule_lag_ms`. A sustained lag, because the per-second histograms are cut by when workers report,
not by intended time, so one late report of warmup samples must not fail the measure phase; land applies
the exact gate over the measure phase's raw samples afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..brokers.handles import BrokerHandle
from ..brokers.provision import attach
from ..core.schedule import NS_PER_S
from ..errors import CellError
from ..lake.layout import write_json
from ..spec.matrix_model import Cell
from .detached import generator_alive
from .work import PHASES, CellWork

STALE_S = 15.0  # a running generator writes its status every second
START_TIMEOUT_S = 120.0  # worker processes start and the topic/stream is created before t0
FINISHING_POLL_S = 0.05  # looks at the status once a phase's end is near or past
SUSTAINED_S = 3  # seconds in a row over the lag limit that mean the generator cannot keep its schedule


def watch_phase(
    work: CellWork,
    phase: str,
    log: Callable[[str], None] = print,
    poll_s: float = 1.0,
    log_every_s: float = 5.0,
) -> dict[str, Any]:
    """Follow `phase` of the cell in `work` until its scheduled end (`cooldown`: until the generator has also
    drained and exited). Returns a small summary of the phase for XCom; raises CellError if the cell failed."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; phases: {', '.join(PHASES)}")
    cell = work.cell()
    w = cell.spec.workload
    state = work.read(work.state) or {}
    brokers = attach(state["brokers"])
    began = time.monotonic()
    start_deadline = began + START_TIMEOUT_S + w.prefill_messages / 10_000
    finish_grace_ns = int((w.drain_timeout_s + w.request_timeout_s + 60) * NS_PER_S)
    last_log = 0.0
    behind = _Behind(cell)
    while True:
        status = work.read(work.status)
        problem = _problem(work, cell, brokers, status, phase) or behind.check(status)
        if problem:
            _fail(work, cell, phase, problem)
        now = time.monotonic_ns()
        if status is not None and status.get("t0_ns") is not None:
            end_ns = status["phases"][phase][1]
            finished = status["state"] in ("finished", "failed")
            if now >= end_ns and (phase != "cooldown" or finished):
                break
            if phase == "cooldown" and now > end_ns + finish_grace_ns:
                _fail(work, cell, phase, "the generator did not finish draining in time")
        elif time.monotonic() > start_deadline:
            _fail(work, cell, phase, f"the schedule did not start within {start_deadline - began:.0f} s")
        if time.monotonic() - last_log >= log_every_s:
            last_log = time.monotonic()
            log(progress_line(status, phase))
        time.sleep(_pause(status, phase, poll_s))
    assert status is not None
    summary = phase_summary(status, phase)
    log(f"{phase} done: {summary}")
    return summary


def _pause(status: dict[str, Any] | None, phase: str, poll_s: float) -> float:
    """Until the next look: a poll, or less when the phase ends sooner, and short looks once it has ended (the
    cooldown waits for the generator's exit), so the next task starts when the schedule says, not up to a poll
    later (a cell's wall time beyond its phases counts that gap)."""
    if status is None or status.get("t0_ns") is None:
        return poll_s
    left_s = (status["phases"][phase][1] - time.monotonic_ns()) / NS_PER_S
    return min(poll_s, max(left_s, FINISHING_POLL_S))


def _problem(
    work: CellWork, cell: Cell, brokers: BrokerHandle, status: dict[str, Any] | None, phase: str
) -> str | None:
    known = work.read(work.generator)
    if known is None:
        return "no generator was started for this cell"
    if status is not None and status["state"] == "failed":
        return f"the generator failed: {status.get('reason')}"
    if status is not None and status["state"] == "finished":
        return None
    if not generator_alive(work, known):
        return f"the generator (pid {known['pid']}) died during {phase}:\n{work.log_tail()}"
    running = status is not None and status["state"] == "running"  # before t0 (topic, prefill) the start timeout rules
    if running and time.monotonic_ns() - status["updated_ns"] > STALE_S * NS_PER_S:
        return f"the generator stopped reporting for more than {STALE_S:.0f} s"
    undeclared = (status or {}).get("undeclared") or []
    if undeclared:  # the generator's own broker watch saw it first: with the signal and the time
        said = "; ".join(f"{f['what']} at {_on_clock(f['at_ns'], status)}" for f in undeclared)
        event = "died" if any(f["kind"] == "undeclared-exit" for f in undeclared) else "failed"
        return f"{said}: a broker {event} during {phase}, and no fault was declared"
    killed = {f["node"] for f in (status or {}).get("faults", []) if f["kind"] in ("kill", "restart")}
    pids = brokers.node_pids()
    dead = [f"node {n} (pid {pids[n]})" for n, alive in brokers.alive().items() if not alive and n not in killed]
    if dead:
        return f"broker {', '.join(dead)} died during {phase}"
    return None


def _on_clock(at_ns: int, status: dict[str, Any] | None) -> str:
    """A moment of the generator's clock from the measure phase's start (its status has the phases once t0 is)."""
    phases = (status or {}).get("phases")
    if not phases:
        return "before the schedule started"
    return f"measure {(at_ns - phases['measure'][0]) / NS_PER_S:+.3f} s"


class _Behind:
    """Counts consecutive status seconds of the measure phase whose send lag p99.9 exceeds the limit (rtt is
    exempt, as in land's gate: a synchronous connection's lag is the system's)."""

    def __init__(self, cell: Cell):
        self.limit_ns = cell.spec.workload.max_schedule_lag_ms * 1e6
        self.gated = cell.spec.measurement != "rtt"
        self.seen: set[int] = set()
        self.worst: list[float] = []

    def check(self, status: dict[str, Any] | None) -> str | None:
        if not self.gated or status is None or status.get("phase") != "measure" or status["updated_ns"] in self.seen:
            return None
        self.seen.add(status["updated_ns"])
        lag = (status.get("lag_ns") or {}).get("99.9")
        self.worst = [*self.worst, lag] if lag is not None and lag > self.limit_ns else []
        if len(self.worst) < SUSTAINED_S:
            return None
        return (
            f"the generator fell behind its schedule: send lag p99.9 over max_schedule_lag_ms="
            f"{self.limit_ns / 1e6:g} for {len(self.worst)} s in a row (worst {max(self.worst) / 1e6:.2f} ms)"
        )


def _fail(work: CellWork, cell: Cell, phase: str, problem: str) -> None:
    reason = f"{phase}: {problem}"
    write_json(work.verdict(phase), {"status": "failed", "reason": reason})
    raise CellError(cell.id, reason)


def progress_line(status: dict[str, Any] | None, phase: str) -> str:
    """One log line: where the schedule is, counts and rates, the last second's latency and send lag."""
    if status is None or status.get("t0_ns") is None:
        return f"[{phase}] waiting for the generator to start its schedule"

    def ms(v: int | None) -> str:
        return "-" if v is None else f"{v / 1e6:.3f}"

    lat, lag = status.get("latency_ns", {}), status.get("lag_ns", {})
    return (
        f"[{phase}] now {status['phase']} {status['elapsed_s']:.1f}/{status['total_s']:.1f}s  "
        f"sent {status['sent']} ({status['sent_per_s']:.0f}/s)  recv {status['received']} "
        f"({status['received_per_s']:.0f}/s)  {status['metric']} ms p50 {ms(lat.get('50'))} p99 {ms(lat.get('99'))} "
        f"p99.9 {ms(lat.get('99.9'))} max {ms(status.get('max_ns'))}  lag p99.9 {ms(lag.get('99.9'))}"
    )


def phase_summary(status: dict[str, Any], phase: str) -> dict[str, Any]:
    """What a phase task returns: live view at its end, and the phase's cumulative send lag."""
    lag = (status.get("phase_lag_ns") or {}).get(phase, {})
    return {
        "phase": phase,
        "cell_id": status["cell_id"],
        "start_ns": status["phases"][phase][0],
        "end_ns": status["phases"][phase][1],
        "sent": status["sent"],
        "received": status["received"],
        "send_lag_p999_ms": None if not lag else lag["99.9"] / 1e6,
        "send_lag_max_ms": None if not lag else lag["max"] / 1e6,
        "generator": status["state"],
    }
