"""The generator as a detached process: drives one provisioned cell for its whole schedule and reports.

Airflow's phase tasks only watch, so load stays continuous from warmup start to cooldown end whatever the
scheduler does. This process writes `status.json` about once a second (atomically replaced) and, at the
end, `cellrun.json` with what `land` needs. SIGTERM (teardown, or land after a failed phase) stops the
cell the same way a failure does: workers reaped, partial run recorded.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console

from ..brokers.provision import attach
from ..core.hdr import new_histogram
from ..errors import CellError
from ..lake.layout import write_json
from ..load.live import LiveMonitor
from ..spec.kept import cell_from
from ..spec.matrix_model import Cell
from ..topology.plan import PlacementPlan
from .brokerwatch import Finding, watch_for
from .drive import CellRun, Fault, drive
from .work import CellWork

STATUS_SCHEMA_VERSION = 1  # 1: first version


class StatusWriter:
    """Turns the live monitor's per-second view into `status.json`, adding the schedule's phase boundaries
    and each phase's cumulative send-lag histogram (the watchers gate on it)."""

    def __init__(self, path: Path, cell: Cell):
        self.path = path
        self.cell = cell
        self.faults: list[dict[str, Any]] = []
        self.undeclared: Callable[[], list[Finding]] = list  # the broker watch's findings, as soon as it has them
        self._phase_lag: dict[str, Any] = {}
        self._last: dict[str, Any] = {}

    def update(self, monitor: LiveMonitor) -> None:
        snap = monitor.snapshot()
        if snap["phase"] in ("warmup", "measure", "cooldown"):
            self._phase_lag.setdefault(snap["phase"], new_histogram()).add(monitor.lag)
        plan = monitor.plan
        self._last = {
            **snap,
            "t0_ns": plan.t0_ns if plan else None,
            "phases": _phases(plan) if plan else None,
        }
        self.write("running")

    def write(self, state: str, reason: str | None = None) -> None:
        lag = {
            phase: {
                "count": h.get_total_count(),
                "99.9": int(h.get_value_at_percentile(99.9)),
                "max": int(h.get_max_value()),
            }
            for phase, h in self._phase_lag.items()
        }
        write_json(
            self.path,
            {
                "schema_version": STATUS_SCHEMA_VERSION,
                "pid": os.getpid(),
                "updated_ns": time.monotonic_ns(),
                "state": state,  # starting | running | finished | failed
                "reason": reason,
                "cell_id": self.cell.id,
                **self._last,
                "phase_lag_ns": lag,
                "faults": self.faults,
                "undeclared": [asdict(f) for f in self.undeclared()],
            },
        )


def _phases(plan: Any) -> dict[str, list[int]]:
    return {
        "warmup": [plan.t0_ns, plan.measure_start_ns],
        "measure": [plan.measure_start_ns, plan.measure_end_ns],
        "cooldown": [plan.measure_end_ns, plan.end_ns],
    }


class _RecordingControl:
    """Fault injection through the detached brokers, noted in the status so a watcher can tell a planned
    broker kill from a broker that died."""

    def __init__(self, brokers: Any, writer: StatusWriter, work: CellWork):
        """`brokers`: attached by PID, or external (which refuse faults). `work`: where a restarted node's new PID
        is recorded, so whoever stops the cell's brokers later stops that one."""
        self.brokers = brokers
        self.writer = writer
        self.work = work

    def _note(self, kind: str, node: int) -> None:
        self.writer.faults.append({"kind": kind, "node": node, "at_ns": time.monotonic_ns()})

    def fault_nodes(self) -> list[int]:
        return self.brokers.fault_nodes()

    def fault_leader(self) -> int:
        return self.brokers.fault_leader()

    def fault_controller(self) -> int:
        return self.brokers.fault_controller()

    def pause_node(self, node: int) -> None:
        self._note("stall", node)
        self.brokers.pause_node(node)

    def resume_node(self, node: int) -> None:
        self._note("resume", node)
        self.brokers.resume_node(node)

    def kill_node(self, node: int) -> None:
        self._note("kill", node)
        self.brokers.kill_node(node)

    def skip_node(self, node: int | None) -> None:
        self.brokers.skip_node(node)

    def restart_node(self, node: int) -> int:
        self._note("restart", node)
        pid = self.brokers.restart_node(node)
        state = self.work.read(self.work.state)
        assert state is not None and state["brokers"] is not None
        state["brokers"]["nodes"][str(node)] = pid
        write_json(self.work.state, state)
        return pid


def generator_main(root: Path) -> int:
    """`sixnines cell drive ROOT`, detached: SIGTERM (teardown, or land after a failed phase) stops the cell the
    way a failure does. Exit 0 if the schedule completed, 1 if the cell failed."""
    work = CellWork(root)
    cell = work.cell()

    def stop(signum: int, frame: object) -> None:
        raise CellError(cell.id, f"generator stopped by signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, stop)
    try:
        return drive_work(work, Console(file=sys.stdout, width=120, force_terminal=False, no_color=True))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def drive_work(work: CellWork, console: Console) -> int:
    """Drive the cell provisioned in `work` for its whole schedule, writing `status.json` as it goes and
    `cellrun.json` at the end; 0 if the schedule completed, 1 if the cell failed (never raises for that). Its
    brokers are watched throughout: one that exits, freezes or is replaced with no fault declared fails it."""
    state = work.read(work.state)
    assert state is not None and state["brokers"] is not None, f"no provisioned cell in {work.root}"
    cell = cell_from(state)
    brokers = attach(state["brokers"])
    writer = StatusWriter(work.status, cell)
    watch = watch_for(brokers)
    writer.undeclared = watch.findings
    writer.write("starting")
    brokers.watch_leaders()
    try:
        driven = drive(
            cell,
            PlacementPlan.from_dict(state["placement"]),  # as provision resolved it
            brokers.target(),
            Path(state["staging"]),
            _RecordingControl(brokers, writer, work),
            console,
            [Fault(**f) for f in state.get("faults", [])],
            on_status=writer.update,
            watch=watch,
            leaders_known=brokers.await_leaders,
        )
    finally:
        brokers.stop_watching()
    facts = {
        **_facts(driven.run),
        "leader_changes": brokers.leader_changes(),
        "leader_poll_errors": brokers.leader_poll_errors(),
    }
    write_json(work.cellrun, {**facts, "status": driven.status, "reason": driven.reason})
    writer.write("finished" if driven.status == "ok" else "failed", driven.reason)
    console.print(f"generator {driven.status}" + (f": {driven.reason}" if driven.reason else ""))
    return 0 if driven.status == "ok" else 1


def _facts(run: CellRun | None) -> dict[str, Any]:
    return run.facts() if run is not None else {"plan": None}
