"""Faults fired during a cell's measure phase, on the schedule's clock: what a cell asks for, what fired, and the
injector the schedule loop ticks (the brokers' control protocol does the freezing and killing; the nodes' own
network-namespace links, `topology.links`, the cutting and squeezing).

A fault aims at a target resolved when it fires: `leader` (who leads the measured route then, asked through the
leader poll), `follower` (a node that does not lead it then), `controller` (the node leading the cluster's
metadata: Kafka's active KRaft controller, the JetStream meta leader), `node:N`, or `random` (one of the nodes);
`follower` and `random` draw from a generator seeded by the workload's seed, so given the same leader a cell's
faults hit the same nodes every run. A fault may also aim at one of the cell's own workers (`worker:relay-0`): the
process is stalled or killed through the cell's workers (`WorkerControl`), whatever the system."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ..core.schedule import NS_PER_S
from ..errors import CellError
from ..topology.links import NodeLinks, shaper_totals
from .brokerwatch import BrokerWatch


class BrokerControl(Protocol):
    """What a fault asks of the brokers: their node ids, who leads the measured route, signals to one node, and
    which node not to ask who leads (one cut off: `skip_node`, None when it is back)."""

    def fault_nodes(self) -> list[int]: ...
    def fault_leader(self) -> int: ...
    def fault_controller(self) -> int: ...
    def pause_node(self, node: int) -> None: ...
    def resume_node(self, node: int) -> None: ...
    def kill_node(self, node: int) -> None: ...
    def restart_node(self, node: int) -> int: ...
    def skip_node(self, node: int | None) -> None: ...


class WorkerControl(Protocol):
    """What a fault asks of the cell's own worker processes, by name (`relay-0`): freeze, thaw (told when the
    freeze began, so the worker's own pause is put down to the declared fault), end."""

    def pause_worker(self, name: str) -> None: ...
    def resume_worker(self, name: str, paused_at_ns: int) -> None: ...
    def kill_worker(self, name: str) -> None: ...


WORKER_PREFIX = "worker:"


@dataclass(frozen=True)
class Fault:
    """A fault injected during `measure`: `stall` freezes a node (SIGSTOP) for `duration_s`; `kill` ends it
    (SIGKILL); `restart` kills it and starts it again on its data; `partition` takes its link down for
    `duration_s`; `bandwidth` shapes its link to `rate_mbit` for `duration_s`. `at_s` counts from the start of the
    measure phase; `target`: leader, follower, controller, node:N or random."""

    kind: Literal["stall", "kill", "restart", "partition", "bandwidth"]
    at_s: float
    duration_s: float = 0.0
    target: str = "leader"
    rate_mbit: float | None = None


def faults_of(spec_faults: Sequence[object]) -> list[Fault]:
    """A cell spec's faults (`spec.faults.FaultSpec`) as the injector's."""
    return [
        Fault(f.action, f.at_s, f.duration_s or 0.0, f.target, f.rate_mbit)  # type: ignore[attr-defined]
        for f in spec_faults
    ]


@dataclass
class FiredFault:
    """A fault as it happened, on the cell's clock (monotonic ns): when it fired and ended, and the node hit."""

    kind: str
    start_ns: int
    end_ns: int | None = None
    target: str = "leader"
    node: int | None = None
    at_s: float | None = None  # as declared, from the start of the measure phase
    duration_s: float | None = None
    detail: str | None = None  # an undeclared fault: what the watch saw (`brokerwatch`)
    rate_mbit: float | None = None  # bandwidth: the rate the node's link was squeezed to
    shaper: dict[str, dict[str, int]] | None = None  # bandwidth: the squeeze's tbf counters per end (`links`)
    shaper_drops: int | None = None  # bandwidth: packets the squeeze dropped, both ends
    shaper_overlimits: int | None = None  # bandwidth: times the squeeze held a packet back, both ends


def resolve_target(
    target: str,
    nodes: Sequence[int],
    leader: Callable[[], int],
    rng: random.Random,
    controller: Callable[[], int] | None = None,
) -> int:
    """The node a fault aimed at `target` hits now. `leader` and `controller` are asked only when the target needs
    them (polls that may wait on a broker)."""
    if target == "leader":
        return leader()
    if target == "controller":
        if controller is None:
            raise CellError("?", "fault target 'controller': these brokers cannot say which node leads their metadata")
        return controller()
    if target == "random":
        if not nodes:
            raise CellError("?", "fault target 'random': the brokers have no nodes to choose from")
        return rng.choice(sorted(nodes))
    if target == "follower":
        leads = leader()
        followers = sorted(n for n in nodes if n != leads)
        if not followers:
            raise CellError("?", f"fault target 'follower': node {leads} leads and there is no other node")
        return rng.choice(followers)
    kind, _, number = target.partition(":")
    if kind != "node" or not number.isdigit():
        raise CellError("?", f"fault target {target!r}: expected 'leader', 'random' or 'node:N'")
    if int(number) not in nodes:
        raise CellError("?", f"fault target {target!r}: no such node; nodes: {', '.join(map(str, sorted(nodes)))}")
    return int(number)


class FaultInjector:
    """Fires each fault when its time comes and ends a lasting one (stall, partition, bandwidth) when it has lasted;
    `close` ends whatever still holds its node (a cell that fails mid-stall must not leave its broker stopped, nor
    a node cut off) and restores every link."""

    def __init__(
        self,
        faults: Sequence[Fault],
        control: BrokerControl,
        measure_start_ns: int,
        clock: Callable[[], int],
        fired: list[FiredFault],
        seed: int = 0,
        watch: BrokerWatch | None = None,
        links: NodeLinks | None = None,
        workers: WorkerControl | None = None,
    ):
        """`fired` is the cell run's own list: what fired is on record even if the cell fails mid-fault. `seed`:
        the workload's, for `random` targets. `watch`: told of each node a fault hits, before it is hit. `links`:
        the broker nodes' own network-namespace links (partition, bandwidth), when each node has a host of its own.
        `workers`: the cell's worker processes, for faults aimed at one of them."""
        self.pending = sorted(faults, key=lambda f: f.at_s)
        self.control = control
        self.measure_start_ns = measure_start_ns
        self.clock = clock
        self.fired = fired
        self.rng = random.Random(seed)
        self.watch = watch if watch is not None else BrokerWatch()
        self.links = links
        self.workers = workers
        self._held: tuple[FiredFault, int, Callable[[FiredFault, int], None]] | None = None
        self._held_until: int | None = None

    def tick(self, now: int) -> None:
        if self.pending and now >= self.measure_start_ns + int(self.pending[0].at_s * NS_PER_S):
            self._fire(self.pending.pop(0))
        if self._held_until is not None and now >= self._held_until:
            self._end()

    def _fire(self, fault: Fault) -> None:
        if fault.target.startswith(WORKER_PREFIX):
            self._fire_at_worker(fault)
            return
        c = self.control
        node = resolve_target(fault.target, c.fault_nodes(), c.fault_leader, self.rng, c.fault_controller)
        fired = FiredFault(fault.kind, self.clock(), None, fault.target, node, fault.at_s, fault.duration_s or None)
        self.fired.append(fired)
        if fault.kind == "stall":
            self.watch.declare_stall(node)
            self.control.pause_node(node)
            # The stall starts when every thread has stopped, not when SIGSTOP was sent: on a busy host that takes
            # milliseconds, and a message sent meanwhile still gets through (seen as an arrival 1 ms "into" it).
            self._hold(fired, node, fault.duration_s, self._thaw)
        elif fault.kind == "partition":
            self._links(fault).cut(node)
            self.control.skip_node(node)  # its answers, if any came, would be a minority's stale view
            self._hold(fired, node, fault.duration_s, self._mend)
        elif fault.kind == "bandwidth":
            assert fault.rate_mbit is not None
            fired.rate_mbit = fault.rate_mbit
            self._links(fault).squeeze(node, fault.rate_mbit)
            self._hold(fired, node, fault.duration_s, self._release)
        elif fault.kind == "kill":
            self.watch.declare_exit(node)
            self.control.kill_node(node)
            fired.end_ns = fired.start_ns
        elif fault.kind == "restart":
            self.watch.declare_exit(node)
            self.watch.declare_replaced(node, self.control.restart_node(node))
            fired.end_ns = self.clock()  # started again (not yet serving: arrivals tell when it does)
        else:
            raise CellError("?", f"fault action {fault.kind!r}: the harness cannot do it (yet)")

    def _fire_at_worker(self, fault: Fault) -> None:
        """A stall (SIGSTOP for duration_s, then SIGCONT) or a kill (SIGKILL) of one of the cell's workers."""
        name, workers = fault.target.removeprefix(WORKER_PREFIX), self.workers
        if workers is None:
            raise CellError("?", f"fault target {fault.target!r}: this run has no worker processes to signal")
        fired = FiredFault(fault.kind, self.clock(), None, fault.target, None, fault.at_s, fault.duration_s or None)
        self.fired.append(fired)
        if fault.kind == "stall":
            workers.pause_worker(name)
            self._hold(fired, -1, fault.duration_s, lambda f, _: workers.resume_worker(name, f.start_ns))
        elif fault.kind == "kill":
            workers.kill_worker(name)
            fired.end_ns = fired.start_ns
        else:
            raise CellError("?", f"fault action {fault.kind!r} on a worker: a worker can be stalled or killed")

    def _links(self, fault: Fault) -> NodeLinks:
        if self.links is None:
            raise CellError(
                "?",
                f"fault action {fault.kind!r}: the broker nodes have no network-namespace links of their own "
                "(workload.placement.broker: one netns host per node)",
            )
        return self.links

    def _hold(self, fired: FiredFault, node: int, duration_s: float, end: Callable[[FiredFault, int], None]) -> None:
        """A lasting fault holds its node from now (once the action took effect) for `duration_s`."""
        fired.start_ns = self.clock()
        self._held = (fired, node, end)
        self._held_until = fired.start_ns + int(duration_s * NS_PER_S)

    def _end(self) -> None:
        assert self._held is not None
        fired, node, end = self._held
        end(fired, node)
        self._held = self._held_until = None
        fired.end_ns = self.clock()

    def _thaw(self, fired: FiredFault, node: int) -> None:
        self.control.resume_node(node)
        self.watch.declare_thaw(node)

    def _mend(self, fired: FiredFault, node: int) -> None:
        assert self.links is not None
        self.links.mend(node)
        self.control.skip_node(None)

    def _release(self, fired: FiredFault, node: int) -> None:
        assert self.links is not None
        fired.shaper = self.links.release(node)
        fired.shaper_drops, fired.shaper_overlimits = shaper_totals(fired.shaper)

    def close(self) -> None:
        try:
            if self._held_until is not None:  # ended early: the fault's record ends when it really did
                self._end()
        finally:
            if self.links is not None:
                self.links.restore()


class NoFaults:
    """The broker control of a real host's part: faults are refused before a cell on real hosts starts."""

    def fault_nodes(self) -> list[int]:
        raise CellError("?", "faults are not injected by load hosts")

    fault_leader = fault_controller = fault_nodes

    def pause_node(self, node: int) -> None:
        raise CellError("?", "faults are not injected by load hosts")

    resume_node = kill_node = pause_node

    def skip_node(self, node: int | None) -> None:
        raise CellError("?", "faults are not injected by load hosts")

    def restart_node(self, node: int) -> int:
        raise CellError("?", "faults are not injected by load hosts")
