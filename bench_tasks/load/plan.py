"""What a worker process is given: its plan (role, cell, broker, where to write), the channels it shares with the
driving process, and the schedules computed from the cell (the same for a Python worker and a worker program,
`load.external`, so the arrival process has one implementation)."""

from __future__ import annotations

import multiprocessing.synchronize
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from typing import Any

import numpy as np

from ..core.schedule import NS_PER_S, stream_offsets_ns
from ..spec.matrix_model import CELL_ADAPTER, CellSpec
from .routes import MEASURED

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
    subscription: int = 0  # bg_consumer: which of the background's subscriptions (consumer groups) it reads
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


def worker_name(plan: WorkerPlan) -> str:
    """How the cell's harness facts and failure reasons name a worker: `producer p0`, `consumer c1`, …"""
    prefix = {"producer": "p", "consumer": "c", "relay": "r", "responder": "s", "laggard": "l"}.get(plan.role, "b")
    return f"{plan.role} {prefix}{plan.index}"


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


def expected_receipts(cell: CellSpec, duration_ns: int) -> int:
    """About how many messages one of the cell's receivers gets over the whole schedule (its share, plus a
    tenth for an uneven share), so their storage can be allocated before the schedule starts."""
    w = cell.workload
    return int(w.rate_per_s * duration_ns / NS_PER_S / max(1, w.consumers) * 1.1) + 1


def background_schedule(cell: CellSpec, plan: WorkerPlan, duration_ns: int) -> tuple[np.ndarray, np.ndarray]:
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
