"""A worker that is another program (`contract.WorkerProgram`), run as a child of the cell's driving process and
seen by `cell.workers.Workers` exactly like a Python worker process: it starts, says it is ready, reports, is told
the schedule's t0 and when to stop, exits, and can be terminated or killed.

One bridge thread per worker reads its events (stdout, `contract.decode_event`) and puts them on the cell's events
queue in the Python workers' form. It also keeps the worker's self-samples in a `saturation.ProcessWatch`, so the
measure phase is summarised and judged by the same code as a Python worker's, adds the pauses the worker measured
(`core.pauses`), and turns its sample files into the lake's Parquet files (`rawfiles`) before passing on `done`.
Anything else the program prints goes to its log in the cell's staging folder, which lands with the cell.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from ..core.pauses import Pause, summarize_pauses
from ..core.saturation import SAMPLE_EVERY_S, ProcessWatch, ThreadTimes
from ..core.schedule import PhasePlan
from ..secrecy import redacted
from . import cpushare, rawfiles
from .contract import START, STOP, ContractError, WorkerProgram, decode_event, plan_keys, write_plan, write_schedule
from .plan import Channels, WorkerPlan, expected_receipts, producer_schedule, worker_name

_PR_SET_PDEATHSIG = 1
# The sample file each role writes, and the lake file it becomes (as the Python workers name theirs).
_FILES = {
    "producer": ("sent-p", "sent-p"),
    "consumer": ("received-c", "received-c"),
    "relay": ("relayed-r", "relayed-r"),
}


def scratch_root(staging: Path) -> Path:
    """Where a cell's worker programs keep their plans, schedules and sample files: beside the staging folder,
    never in it (none of it lands), removed when the cell's workers are reaped."""
    return staging.parent / f"{staging.name}.workers"


class ExternalWorker:
    """One worker program, with the process interface `Workers` uses (name, start, exitcode, is_alive, terminate,
    kill, join, pid) and the two commands of the contract (`begin`, `stop`)."""

    def __init__(self, plan: WorkerPlan, program: WorkerProgram, channels: Channels):
        if plan.netns or plan.clock_shift_ns:
            raise ContractError(
                f"{worker_name(plan)}: a worker program runs on the driving host's clock and network only "
                "(no workload.placement on other hosts yet)"
            )
        self.plan, self.program, self.channels = plan, program, channels
        self.name = f"{plan.role}-{plan.index}"
        self.staging = Path(plan.staging_dir)
        self.scratch = scratch_root(self.staging) / self.name
        self.log = self.staging / f"worker-{self.name}.log"
        self.popen: subprocess.Popen[str] | None = None
        self.watch = ProcessWatch(clock=time.monotonic_ns, read=dict, runtime=program.runtime)
        self.t0_ns = 0
        self.polling: set[str] = set()  # threads that spin or yield on an empty route by design (`work` in samples)
        self.declared: list[Pause] = []  # stalls a declared fault put on this worker (`declare_pause`)
        self._lock = threading.Lock()
        self._bridge: threading.Thread | None = None

    # -- the process interface --------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    @property
    def exitcode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def is_alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)
        plan_file = write_plan(self._plan_keys(), self.scratch / "plan.properties")
        cpus = self.plan.cpus
        with self.log.open("ab") as log:
            self.popen = subprocess.Popen(
                self.program.command(self.scratch, plan_file),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
                env={**os.environ, **self.program.env, **self._secret_env()},
                preexec_fn=lambda: _child_setup(cpus),
            )
        self._bridge = threading.Thread(target=self._pump, name=f"bridge-{self.name}", daemon=True)
        self._bridge.start()

    def _secret_env(self) -> dict[str, str]:
        """The cell's client access settings for the program, in its environment only (`WorkerProgram.secret_env`)."""
        convert = self.program.secret_env
        return dict(convert(self.plan.client or {})) if convert else {}

    def join(self, timeout: float | None = None) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        if self._bridge is not None and self.popen is not None and self.popen.poll() is not None:
            self._bridge.join(timeout)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.is_alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(sig)  # type: ignore[union-attr]

    # -- commands ---------------------------------------------------------------------------------------------
    def declare_pause(self, pause: Pause) -> None:
        """A declared fault stopped this worker for `pause`: the pause it measures then is the fault's, on record
        as such, not the harness's saturation (`core.pauses`)."""
        self.declared.append(pause)

    def begin(self, t0_ns: int) -> None:
        """The schedule starts at `t0_ns` for every producer."""
        self.t0_ns = t0_ns
        self._command(f"{START} {t0_ns}")

    def stop(self) -> None:
        self._command(STOP)

    def _command(self, line: str) -> None:
        stdin: IO[str] | None = self.popen.stdin if self.popen is not None else None
        if stdin is None or not self.is_alive():
            return
        with self._lock, contextlib.suppress(BrokenPipeError, ValueError):
            stdin.write(line + "\n")
            stdin.flush()

    def cleanup(self) -> None:
        """Remove the scratch folder (plans, schedules, sample files already converted)."""
        shutil.rmtree(self.scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.scratch.parent.rmdir()  # the last worker of the cell removes the cell's folder

    # -- the plan ---------------------------------------------------------------------------------------------
    def _plan_keys(self) -> dict[str, str]:
        plan, cell = self.plan, self.plan.cell()
        w, duration = cell.workload, sum(self.channels.phase_ns)
        schedule, messages, expected = None, 0, 0
        if plan.role == "producer":
            if w.connections != 1:
                raise ContractError(f"{worker_name(plan)}: a worker program sends on one connection")
            offsets, _ = producer_schedule(cell, plan.index, duration)
            schedule, messages = write_schedule(offsets, self.scratch / "schedule.i64"), int(offsets.size)
        else:
            expected = expected_receipts(cell, duration)
        return plan_keys(
            role=plan.role,
            index=plan.index,
            name=worker_name(plan),
            cell_id=plan.cell_id,
            address=plan.url,
            route=plan.route,
            names=plan.names or plan.cell_id,
            measurement=cell.measurement,
            message_size_bytes=w.message_size_bytes,
            phase_ns=self.channels.phase_ns,
            max_schedule_lag_ms=w.max_schedule_lag_ms,
            report_every_ms=round(SAMPLE_EVERY_S * 1000),
            scratch=self.scratch,
            program=self.program,
            schedule=schedule,
            messages=messages,
            expected_messages=expected,
        )

    # -- the bridge -------------------------------------------------------------------------------------------
    def _pump(self) -> None:
        """Every line the program prints, until it closes stdout: events passed on, the rest logged."""
        assert self.popen is not None and self.popen.stdout is not None
        with self.log.open("a") as log:
            for line in self.popen.stdout:
                try:
                    event = decode_event(line)
                except ContractError as exc:
                    self._fail(str(exc))
                    continue
                if event is None:
                    log.write(line)
                    log.flush()
                    continue
                try:
                    self._handle(event)
                except Exception as exc:  # a sample file that cannot be read: the cell fails, naming the worker
                    self._fail(f"{type(exc).__name__}: {exc}")

    def _handle(self, event: dict[str, Any]) -> None:
        kind = event["kind"]
        if kind == "sample":
            self._sample(event)
            return
        if kind == "ready" and self.plan.cpu_share is not None and self.pid is not None:
            cpushare.confine(f"{self.plan.cell_id}-{self.plan.role}-{self.plan.index}", self.plan.cpu_share, self.pid)
        if kind == "harness":
            event = {**event, "name": worker_name(self.plan), "summary": self._summary(event.get("summary") or {})}
        if kind == "done":
            self._convert()
        self.channels.events.put(event)

    def _sample(self, event: dict[str, Any]) -> None:
        """A self-sample into the watch: a thread that spins by design counts the time it spent on messages."""
        work = event.get("work") or {}
        threads = {
            name: ThreadTimes(int(work.get(name, run)), int(wait), int(slices))
            for name, (run, wait, slices) in (event.get("threads") or {}).items()
        }
        w = self.watch
        w.at_ns.append(int(event["at_ns"]))
        w.threads.append(threads)
        w.cpu_ns.append(int(event["cpu_ns"]))
        w.backlog.append(int(event.get("backlog", -1)))
        w.handled.append(int(event["handled"]))
        w.message_threads = tuple(event.get("message_threads") or self._message_threads())
        self.polling.update(work)

    def _message_threads(self) -> tuple[str, ...]:
        return () if self.plan.role == "producer" else ("msg-",)

    def _summary(self, reported: dict[str, Any]) -> dict[str, Any]:
        """The measure phase as the harness judges any worker (`saturation.summarize`), with the pauses the worker
        measured and what its clients reported."""
        warmup, measure, _ = self.channels.phase_ns
        window = (self.t0_ns + warmup, self.t0_ns + warmup + measure)
        limit_ms = self.plan.cell().workload.max_schedule_lag_ms
        summary: dict[str, Any] = self.watch.summary(window, limit_ms) if self.t0_ns else {"samples": 0}
        explained = self.program.pauses(self.scratch) if self.program.pauses else []
        summary["polling_threads"] = sorted(self.polling)
        summary["pauses"] = summarize_pauses(reported.get("hiccups") or [], explained, window, self.declared)
        summary["dropped"] = int(reported.get("dropped", 0))
        summary["client_errors"] = reported.get("client_errors") or {"count": 0, "kinds": {}, "last": None}
        summary["program"] = {"runtime": self.program.runtime, "client": redacted(reported.get("client"))}
        return summary

    def _convert(self) -> None:
        """The worker's sample file as the lake's Parquet file, every row kept; the raw file then goes."""
        prefix, target = _FILES[self.plan.role]
        raw = self.scratch / f"{prefix}{self.plan.index}{rawfiles.SUFFIX}"
        if not raw.exists():
            raise ContractError(f"{worker_name(self.plan)} said done without writing {raw.name}")
        phases = PhasePlan(self.t0_ns, *self.channels.phase_ns)
        rawfiles.convert(raw, self.staging / f"{target}{self.plan.index}.parquet", self.plan.index, phases)
        raw.unlink()

    def _fail(self, error: str) -> None:
        self.channels.events.put({"kind": "failed", "role": self.plan.role, "index": self.plan.index, "error": error})


def _child_setup(cpus: tuple[int, ...]) -> None:
    """In the child between fork and exec: die with the driving process's thread, and run on the cell's CPUs."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if cpus:
        os.sched_setaffinity(0, cpus)
