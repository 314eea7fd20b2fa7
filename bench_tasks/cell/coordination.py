"""What differs between a cell driven from one machine and one host's share of a cell split over real hosts.

On one machine every worker runs here, on CLOCK_MONOTONIC, `t0` is now plus a margin, and the drain waits until
this process has received what it sent. A host part runs only the workers placed on its host, on the host clock;
the first load host creates the routes and the others wait for it; every host computes the same `t0`; a host
whose producers are done keeps receiving until every host's are, and the drain counts what all hosts sent and
received. `drive` asks a `Coordinator` at each of those points and never branches on which kind it has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from ..core.schedule import NS_PER_S
from ..errors import CellError
from ..load.live import LiveMonitor
from ..spec.matrix_model import Cell
from ..topology import HOSTS_TIMEOUT_S
from ..topology.hosts import clock_offsets
from ..topology.netns import Topology
from ..topology.plan import PlacementPlan
from ..topology.rendezvous import HostPart
from .workers import Workers

# Between "all workers ready" and t0 on one machine: a worker polls for t0 every 5 ms and then only adds it to
# its precomputed offsets; a late start falls in warmup, whose lag no gate reads.
START_MARGIN_NS = 50_000_000
PROGRESS_EVERY_NS = 500_000_000  # a host part's progress note while it waits for the other hosts


class Coordinator(Protocol):
    clock: Callable[[], int]
    clock_shift_ns: int

    def label(self, cell: Cell) -> str: ...
    def runs_here(self, plan: PlacementPlan, role: str, index: int) -> bool: ...
    def prepare_routes(self, prepare: Callable[[], None]) -> None: ...
    def clock_offsets(self, cell: Cell, topology: Topology | None) -> list[dict[str, Any]]: ...
    def start_at(self) -> tuple[int, float]: ...
    def after_sending(self, workers: Workers, listeners: list[Any], until: int) -> None: ...
    def drain(self, workers: Workers, listeners: list[Any], until: int) -> None: ...
    def drain_from(self, monitor: LiveMonitor) -> int: ...


class OneMachine:
    """Every worker here, on this machine's monotonic clock."""

    clock: Callable[[], int] = staticmethod(time.monotonic_ns)
    clock_shift_ns = 0

    def label(self, cell: Cell) -> str:
        return cell.label

    def runs_here(self, plan: PlacementPlan, role: str, index: int) -> bool:
        return True

    def prepare_routes(self, prepare: Callable[[], None]) -> None:
        prepare()

    def clock_offsets(self, cell: Cell, topology: Topology | None) -> list[dict[str, Any]]:
        return clock_offsets(cell, topology)

    def start_at(self) -> tuple[int, float]:
        return time.monotonic_ns() + START_MARGIN_NS, time.time() + START_MARGIN_NS / NS_PER_S

    def after_sending(self, workers: Workers, listeners: list[Any], until: int) -> None:
        """Nothing to wait for: every producer of the cell ran here."""

    def drain_from(self, monitor: LiveMonitor) -> int:
        """The drain timeout counts from the producers' last send or ack (as far as their reports say): a
        producer that then only waited out acks that never came (a killed leader's) gave stragglers that
        time already, and the drain need not wait it again."""
        return monitor.last_producer_news_ns or self.clock()

    def drain(self, workers: Workers, listeners: list[Any], until: int) -> None:
        monitor = workers.monitor
        while monitor.total_received < monitor.total_sent and self.clock() < until:
            workers.pump(listeners)


class OneHost:
    """This host's share of a cell whose load runs on real hosts, meeting the others through the rendezvous."""

    def __init__(self, part: HostPart):
        self.part = part
        self.clock = part.clock
        self.clock_shift_ns = part.clock_shift_ns

    def label(self, cell: Cell) -> str:
        return f"{cell.label} @ {self.part.host}"

    def runs_here(self, plan: PlacementPlan, role: str, index: int) -> bool:
        return plan.host_of(role, index) == self.part.host

    def prepare_routes(self, prepare: Callable[[], None]) -> None:
        """The first load host makes the routes; the others wait for it."""
        sync = self.part.rendezvous
        if self.part.leader:
            prepare()
            sync.note("prepared", {})
        else:
            sync.wait("prepared", HOSTS_TIMEOUT_S, sync.hosts[:1], hint="the first load host creates the routes")

    def clock_offsets(self, cell: Cell, topology: Topology | None) -> list[dict[str, Any]]:
        return clock_offsets(cell, part=self.part)

    def start_at(self) -> tuple[int, float]:
        t0 = self.part.agree_t0(HOSTS_TIMEOUT_S)  # the host clock is the wall clock's epoch at monotonic's rate
        return t0, t0 / NS_PER_S

    def after_sending(self, workers: Workers, listeners: list[Any], until: int) -> None:
        """This host's producers are done; its receivers keep going until every host's producers are."""
        sync = self.part.rendezvous
        sync.note("progress", _progress(workers.monitor))
        while len(sync.notes("progress")) < len(sync.hosts):
            sync.check_others()
            if self.clock() > until:
                missing = set(sync.hosts) - set(sync.notes("progress"))
                raise CellError(
                    workers.cell_id, f"producers of host(s) {', '.join(sorted(missing))} did not finish in time"
                )
            workers.pump_for(PROGRESS_EVERY_NS, self.clock, listeners)
        self._say(workers.monitor, "every host's producers are done")

    def drain_from(self, monitor: LiveMonitor) -> int:
        """Now, when every host's producers are done: this host's monitor knows only its own producers' sends."""
        return self.clock()

    def drain(self, workers: Workers, listeners: list[Any], until: int) -> None:
        """Until everything every host sent has been received by some host (each message is received in one
        place: its route's consumers share it), or the drain timeout."""
        sync = self.part.rendezvous
        while self.clock() < until:
            sync.note("progress", _progress(workers.monitor))
            notes = sync.notes("progress").values()
            sent, received = sum(n["sent"] for n in notes), sum(n["received"] for n in notes)
            if received >= sent:
                self._say(workers.monitor, f"all {sent} messages sent by the hosts were received")
                return
            workers.pump_for(PROGRESS_EVERY_NS, self.clock, listeners)
        self._say(workers.monitor, "drain timeout: the cell counts what has not arrived as lost")

    def _say(self, monitor: LiveMonitor, what: str) -> None:
        """A host part's step in its log, timed from t0 (the hosts' logs line up by it)."""
        since = (self.clock() - monitor.plan.t0_ns) / NS_PER_S if monitor.plan else 0.0
        monitor.console.print(f"host {self.part.host} at t0{since:+.1f}s: {what}", highlight=False)


def _progress(monitor: LiveMonitor) -> dict[str, int]:
    return {"sent": monitor.total_sent, "received": monitor.total_received}


def coordinator_for(part: HostPart | None) -> Coordinator:
    return OneMachine() if part is None else OneHost(part)
