"""What a worker says of itself: that it is ready (setup heap frozen, CPU share taken), and at the end the measure
phase as the harness saw itself (`core.saturation`) with its clients' errors and what it dropped."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import Any

from ..core.saturation import ProcessWatch
from .driver import Driver
from .plan import Channels, WorkerPlan, worker_name


def _freeze_setup_heap() -> None:
    """Everything allocated during setup lives for the whole cell: move it out of the collector's sight so
    a full collection during the schedule scans only what the schedule itself allocates."""
    gc.collect()
    gc.freeze()


def ready(plan: WorkerPlan, channels: Channels, **facts: Any) -> None:
    """Setup is over: freeze its heap, take on the worker's CPU share if it has one, and say so. The share
    models what a smaller generator host sustains, so it starts here, not at the process's start: a heap freeze
    and a connection cost ~0.1 s of CPU, which at 1 % of a CPU would fill a cell's start with 10 s of setup
    (and on a slower host outlast the parent's readiness timeout) before the load it is meant to starve."""
    _freeze_setup_heap()
    if plan.cpu_share is not None:
        from .cpushare import confine

        confine(f"{plan.cell_id}-{plan.role}-{plan.index}", plan.cpu_share)
    channels.events.put({"kind": "ready", "role": plan.role, "index": plan.index, **facts})


def report_harness(
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
        {"kind": "harness", "role": plan.role, "index": plan.index, "name": worker_name(plan), "summary": summary}
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
