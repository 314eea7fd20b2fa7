"""Where a cell's drain timeout starts counting: the producers' last send or ack as their progress reports say
(a producer that then only waited out acks that never came, a killed leader's, already gave stragglers that
time), and on a host part, now (its monitor knows only its own producers)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
from rich.console import Console

from bench_tasks.cell.coordination import OneHost, OneMachine
from bench_tasks.load.live import LiveMonitor


class Clock:
    """A hand-moved clock (ns) for the monitor and the coordinator."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def progress(index: int, attempted: int, acked: int) -> dict[str, Any]:
    empty = np.empty(0, np.int64)
    return {
        "kind": "progress",
        "role": "producer",
        "index": index,
        "attempted": attempted,
        "acked": acked,
        "errors": 0,
        "lag_ns": empty,
        "ack_intended_ns": empty,
        "ack_sent_ns": empty,
        "ack_at_ns": empty,
    }


def monitor_on(clock: Clock) -> LiveMonitor:
    monitor = LiveMonitor("cell", "e2e", Console(quiet=True))
    monitor.clock = clock
    return monitor


def test_the_drain_counts_from_the_last_report_that_moved() -> None:
    clock = Clock()
    monitor = monitor_on(clock)
    coordinator = OneMachine()
    coordinator.clock = clock
    assert coordinator.drain_from(monitor) == clock.now  # nothing reported yet: from now, as before
    monitor.handle(progress(0, attempted=100, acked=90))
    clock.now = 2_000
    monitor.handle(progress(1, attempted=50, acked=50))  # another producer's first news
    clock.now = 3_000
    monitor.handle(progress(0, attempted=100, acked=100))  # acks still arriving are news
    clock.now = 9_000
    monitor.handle(progress(0, attempted=100, acked=100))  # waiting out acks that never come is not
    monitor.handle(progress(1, attempted=50, acked=50))
    assert monitor.last_producer_news_ns == 3_000
    assert coordinator.drain_from(monitor) == 3_000


def test_a_host_part_drains_from_now() -> None:
    """Other hosts' producers may have sent until now; this host's monitor has not seen them."""
    clock = Clock()
    monitor = monitor_on(clock)
    monitor.handle(progress(0, attempted=10, acked=10))
    host = OneHost(SimpleNamespace(clock=clock, clock_shift_ns=0))  # type: ignore[arg-type]  # no rendezvous needed
    clock.now = 5_000
    assert host.drain_from(monitor) == 5_000
