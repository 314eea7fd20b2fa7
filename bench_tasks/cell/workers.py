"""A cell's worker processes seen from the parent: started by role, their events pumped into the live monitor,
their health checked, and every one of them reaped whatever happens."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
from collections.abc import Callable
from typing import Any

from ..brokers.process import wait_stopped
from ..core.pauses import Pause
from ..errors import CellError
from ..load.contract import WorkerProgram
from ..load.external import ExternalWorker
from ..load.generator import worker_main
from ..load.live import LiveMonitor
from ..load.plan import Channels, WorkerPlan
from .workerctx import worker_context

# A worker program's last sample file is converted by its bridge thread once the program said `done`, which may
# be after the process has exited: cleanup waits this long for it (a stopped cell keeps what its workers wrote).
_CONVERT_S = 60.0


class Workers:
    """The processes of one cell, started by `worker_context()`."""

    def __init__(self, cell_id: str, monitor: LiveMonitor, phase_ns: tuple[int, int, int]):
        self.cell_id = cell_id
        self.monitor = monitor
        self.ctx = worker_context()
        ctx = self.ctx
        self.channels = Channels(
            events=ctx.Queue(),
            start_at_ns=ctx.Value("q", 0),
            stop=ctx.Event(),
            phase_ns=phase_ns,
            owner_pid=os.getpid(),
        )
        self.procs: list[Any] = []
        self.done: set[str] = set()
        self.on_pump: Callable[[], None] = lambda: None  # the cell's broker watch looks whenever events are awaited
        self.killed: set[str] = set()  # workers a declared fault killed
        self.ready_s = 0.0  # from asking for workers until all of them were ready, summed over the groups asked for

    def process(self, plan: WorkerPlan, program: WorkerProgram | None = None) -> Any:
        """A worker of the cell: a Python worker process, or `program` (a worker program honouring the contract,
        docs/workers.md) run as a child process behind the same interface."""
        if program is not None:
            proc: Any = ExternalWorker(plan, program, self.channels)
        else:
            proc = self.ctx.Process(
                target=worker_main, args=(plan, self.channels), name=f"{plan.role}-{plan.index}", daemon=True
            )
        self.procs.append(proc)
        return proc

    @property
    def programs(self) -> list[ExternalWorker]:
        return [p for p in self.procs if isinstance(p, ExternalWorker)]

    def begin(self, t0_ns: int) -> None:
        """The schedule starts at `t0_ns` for every producer: Python workers read it from the shared value,
        worker programs are told."""
        self.channels.start_at_ns.value = t0_ns
        for program in self.programs:
            program.begin(t0_ns)

    def stop(self) -> None:
        """Every worker should finish: Python workers see the shared event, worker programs are told."""
        self.channels.stop.set()
        for program in self.programs:
            program.stop()

    def start(self, group: list[Any], timeout_s: float) -> None:
        """Start a group, in its order, and wait until each of them says it is ready (the wait counts in
        `ready_s`)."""
        asked = time.monotonic()
        for proc in group:
            proc.start()
        self.await_roles(group, "ready", timeout_s)
        self.ready_s += time.monotonic() - asked

    def pump(self, procs: list[Any] | None = None) -> None:
        """Handle every pending event (waiting at most 50 ms for the first), then check the workers' health."""
        try:
            event = self.channels.events.get(timeout=0.05)
            while True:
                self._handle(event)
                event = self.channels.events.get_nowait()
        except queue.Empty:
            pass
        self.monitor.refresh()
        self.on_pump()
        for proc in self.procs if procs is None else procs:
            if proc.exitcode is not None and proc.exitcode != 0:
                raise CellError(self.cell_id, self._exited(proc))

    def pump_for(self, ns: int, clock: Callable[[], int], procs: list[Any] | None = None) -> None:
        end = clock() + ns
        while clock() < end:
            self.pump(procs)

    def await_roles(self, procs: list[Any], kind: str, timeout_s: float) -> None:
        """Wait until every process in `procs` has sent an event of `kind` (`done` ones count as done)."""
        wanted = {p.name for p in procs}
        seen = self.done & wanted if kind == "done" else set()
        deadline = time.monotonic() + timeout_s
        while not wanted <= seen:
            if time.monotonic() > deadline:
                raise CellError(self.cell_id, f"timed out waiting for {sorted(wanted - seen)} to be {kind}")
            try:
                event = self.channels.events.get(timeout=0.05)
            except queue.Empty:
                for p in procs:
                    if p.exitcode is not None and p.name not in seen and p.exitcode != 0:
                        raise CellError(self.cell_id, self._exited(p)) from None
                self.monitor.refresh()
                self.on_pump()
                continue
            self._handle(event)
            if event["kind"] == kind:
                seen.add(f"{event['role']}-{event['index']}")

    def _exited(self, proc: Any) -> str:
        declared = " (killed by a declared fault)" if proc.name in self.killed else ""
        return f"{proc.name} exited with code {proc.exitcode}{declared}"

    # -- faults aimed at a worker (cell.faults.WorkerControl) ---------------------------------------------------
    def _named(self, name: str) -> Any:
        for proc in self.procs:
            if proc.name == name:
                return proc
        raise CellError(self.cell_id, f"fault target worker:{name}: no such worker; workers: {self._names()}")

    def _names(self) -> str:
        return ", ".join(sorted(p.name for p in self.procs))

    def pause_worker(self, name: str) -> None:
        """SIGSTOP, returning once every thread of the worker has stopped."""
        pid = self._named(name).pid
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)

    def resume_worker(self, name: str, paused_at_ns: int) -> None:
        """SIGCONT; a worker program is told its pause since `paused_at_ns` was the declared stall, so it is
        recorded as the fault, not judged as the harness's saturation."""
        proc = self._named(name)
        with contextlib.suppress(ProcessLookupError):  # ended meanwhile: its exit is what the cell reports
            os.kill(proc.pid, signal.SIGCONT)
        if isinstance(proc, ExternalWorker):
            proc.declare_pause(Pause(paused_at_ns, time.monotonic_ns() - paused_at_ns, "a declared stall"))

    def kill_worker(self, name: str) -> None:
        proc = self._named(name)
        self.killed.add(name)
        os.kill(proc.pid, signal.SIGKILL)

    def _handle(self, event: dict[str, Any]) -> None:
        if event["kind"] == "failed":
            raise CellError(self.cell_id, f"{event['role']} {event['index']} failed: {event['error']}")
        if event["kind"] == "done":
            self.done.add(f"{event['role']}-{event['index']}")
        self.monitor.handle(event)

    def drain_events(self) -> None:
        """Hand every event still queued to the monitor (workers are done: nothing more is coming)."""
        with contextlib.suppress(queue.Empty):
            while True:
                self.monitor.handle(self.channels.events.get(timeout=0.05))

    def reap(self) -> None:
        """Tell every worker to stop, join them (draining the queue so none blocks on exit), then terminate,
        then kill: no worker outlives the cell."""
        self.stop()
        deadline = time.monotonic() + 15
        while any(p.is_alive() for p in self.procs) and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                self.channels.events.get(timeout=0.01)  # a worker that exits in 5 ms is joined then
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for program in self.programs:  # a sample file announced as the program ended is converted before it goes
            program.join(_CONVERT_S)
            program.cleanup()
