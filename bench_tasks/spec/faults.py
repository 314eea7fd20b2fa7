"""Faults a matrix declares: `{at_s, action, target, duration_s}` on the measure phase's clock.

The shape of one fault is checked here (a stall, partition or bandwidth squeeze needs its duration, a squeeze its
`rate_mbit`, a kill has none, a target is `leader`, `follower`, `controller`, `random` or `node:N`, or one of the
cell's own workers, `worker:relay-N`); what a system can do to its nodes (its actions, targets and node ids) is asked
of the system when the cell is validated (`check_faults`), so the core names no system; a worker is the harness's
own process, so what may be done to it is the same for every system (`check_worker_faults`); `partition` and
`bandwidth` act on a node's own network-namespace link, so the cell must give each node a namespace host of its own
(`check_fault_links`). A fault is part of the cell's spec: a cell with a
fault is a different cell (another id) from the same cell without.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_serializer, model_validator

from .base import StrictModel

FaultAction = Literal["stall", "kill", "restart", "partition", "bandwidth"]
FAULT_ACTIONS: tuple[str, ...] = ("stall", "kill", "restart", "partition", "bandwidth")
LASTING = ("stall", "partition", "bandwidth")  # actions that hold their node for duration_s
ON_THE_LINK = ("partition", "bandwidth")  # actions on a node's own network-namespace link
TARGET_KINDS = ("leader", "follower", "controller", "node", "random")
_TARGET = re.compile(r"^(leader|follower|controller|random|node:(\d+))$")
# A cell's own worker as a target: `worker:relay-0`. Only relays: in a chain the relay is the service under test
# (seed 002's microservice), while a stalled producer or consumer would delay the harness's own stamps, so its
# cell would measure the harness. A worker is stalled (SIGSTOP, SIGCONT) or killed (SIGKILL), never restarted.
WORKER_ROLES = ("relay",)
WORKER_ACTIONS = ("stall", "kill")
_WORKER = re.compile(r"^worker:(relay)-(\d+)$")


@dataclass(frozen=True)
class FaultSupport:
    """What a system can do to its nodes, as its cell model knows it (the system's `System` sets it, so the spec
    names no system): actions, target kinds, and the node ids given broker settings (None: not known before
    the brokers start)."""

    system: str = "this system"
    actions: frozenset[str] = frozenset()
    targets: frozenset[str] = frozenset()
    nodes: Callable[[Any], list[int] | None] = lambda broker: None
    node_hosts: bool = False  # each node can run on a host (network namespace) of its own


class FaultSpec(StrictModel):
    """One fault of a cell. `at_s` counts from the start of the measure phase; `duration_s` is how long a stall
    keeps the node frozen (SIGSTOP, then SIGCONT), a partition keeps its link down, a bandwidth squeeze keeps its
    link at `rate_mbit`."""

    at_s: float = Field(ge=0, description="seconds after the measure phase starts")
    action: FaultAction = Field(
        description="stall: SIGSTOP for duration_s; kill: SIGKILL, no restart; restart: SIGKILL, then started again "
        "on its data; partition: the node's network-namespace link down for duration_s; bandwidth: the node's link "
        "shaped to rate_mbit (tc tbf, both directions) for duration_s"
    )
    target: str = Field(
        "leader",
        description="leader (of the measured route when the fault fires), follower (a node that does not lead it), "
        "controller (the node leading the cluster's metadata), node:N, or random (follower and random: drawn from "
        "a generator seeded by workload.seed); worker:relay-N: the chain's N-th relay process (stall or kill)",
    )
    duration_s: float | None = Field(
        None, gt=0, description="stall, partition, bandwidth: how long the node stays frozen, cut off or squeezed"
    )
    rate_mbit: float | None = Field(None, gt=0, description="bandwidth: the node's link rate in Mbit/s (10^6 bit/s)")

    @model_serializer(mode="wrap")
    def _without_rate(self, handler: Any) -> dict[str, Any]:
        """A fault without a rate dumps as before `rate_mbit` existed, so existing cell ids stay the same."""
        data = handler(self)
        if data.get("rate_mbit", 0) is None:
            del data["rate_mbit"]
        return data

    @model_validator(mode="after")
    def _shape(self) -> FaultSpec:
        if not _TARGET.match(self.target) and not _WORKER.match(self.target):
            expected = "'leader', 'follower', 'controller', 'random', 'node:N' (N a node id) or 'worker:relay-N'"
            raise ValueError(f"target {self.target!r}: expected {expected}")
        if self.action in LASTING and self.duration_s is None:
            raise ValueError(f"duration_s: required for action {self.action!r} (how long it holds the node)")
        if self.action not in LASTING and self.duration_s is not None:
            raise ValueError(f"duration_s: only for actions {', '.join(LASTING)}; a {self.action} has no duration")
        if self.action == "bandwidth" and self.rate_mbit is None:
            raise ValueError("rate_mbit: required for action 'bandwidth' (the node's link rate in Mbit/s)")
        if self.action != "bandwidth" and self.rate_mbit is not None:
            raise ValueError(f"rate_mbit: only for action 'bandwidth'; a {self.action} sets no rate")
        return self

    @property
    def target_kind(self) -> str:
        return self.target.split(":", 1)[0]

    @property
    def worker(self) -> tuple[str, int] | None:
        """The role and index of a `worker:<role>-N` target (None: a broker node)."""
        found = _WORKER.match(self.target)
        return (found.group(1), int(found.group(2))) if found else None

    @property
    def node(self) -> int | None:
        """N of a `node:N` target."""
        found = _TARGET.match(self.target)
        return int(found.group(2)) if found and found.group(2) else None

    @property
    def ends_at_s(self) -> float:
        return self.at_s + (self.duration_s or 0.0)

    def short(self) -> str:
        """The fault in a cell's label: `stall@2s/leader 1s`."""
        rate = f" {self.rate_mbit:g}Mbit" if self.rate_mbit else ""
        lasting = f" {self.duration_s:g}s" if self.duration_s else ""
        return f"{self.action}@{self.at_s:g}s/{self.target}{lasting}{rate}"


def check_faults(
    faults: Sequence[FaultSpec],
    measure_s: float,
    actions: Collection[str],
    targets: Collection[str],
    system: str,
) -> list[str]:
    """Every problem of a cell's faults, each naming its field (`faults[1].action: ...`): what the system does
    not support, a fault outside the measure phase, a fault while an earlier one still holds its node."""
    problems = []
    for i, fault in enumerate(faults):
        where = f"faults[{i}]"
        if fault.worker is not None:
            pass  # the harness's own process, the same for every system (check_worker_faults)
        elif fault.action not in actions:
            supported = ", ".join(a for a in FAULT_ACTIONS if a in actions) or "none"
            why = " (a restart starts the killed node again on its data; the system must declare it can)"
            problems.append(
                f"{where}.action: {fault.action!r} — {system} supports: {supported}"
                + (why if fault.action == "restart" else "")
            )
        if fault.worker is None and fault.target_kind not in targets:
            supported = ", ".join(t if t != "node" else "node:N" for t in TARGET_KINDS if t in targets) or "none"
            problems.append(f"{where}.target: {fault.target!r} — {system} supports: {supported}")
        if fault.at_s >= measure_s:
            phase = f"workload.measure_s={measure_s:g}"
            problems.append(f"{where}.at_s: {fault.at_s:g} — beyond the measure phase ({phase})")
        elif fault.ends_at_s > measure_s:
            problems.append(
                f"{where}.duration_s: {fault.duration_s:g} — the {fault.action} would outlast the measure phase "
                f"(at_s {fault.at_s:g} + {fault.duration_s:g} > workload.measure_s={measure_s:g})"
            )
    ordered = sorted(enumerate(faults), key=lambda pair: pair[1].at_s)
    for (_, first), (j, second) in itertools.pairwise(ordered):
        if second.at_s < first.ends_at_s:
            problems.append(f"faults[{j}].at_s: {second.at_s:g} — fires while an earlier fault still holds its node")
    return problems


def check_worker_faults(faults: Sequence[FaultSpec], measurement: str, relays: int) -> list[str]:
    """Faults aimed at the cell's own workers: a stall or a kill of a relay the cell has (a chain's)."""
    problems = []
    for i, fault in enumerate(faults):
        if fault.worker is None:
            continue
        role, index = fault.worker
        if fault.action not in WORKER_ACTIONS:
            problems.append(f"faults[{i}].action: {fault.action!r} — a worker can be stalled or killed")
        count = relays if measurement == "chain" else 0
        if index >= count:
            has = f"relays {', '.join(f'{role}-{n}' for n in range(count))}" if count else "no relay (not a chain)"
            problems.append(f"faults[{i}].target: {fault.target!r} — this cell has {has}")
    return problems


def check_fault_links(faults: Sequence[FaultSpec], node_links: bool) -> list[str]:
    """`partition` and `bandwidth` act on one node's own network-namespace link: the cell must put each node on a
    namespace host of its own (`node_links`)."""
    return [
        f"faults[{i}].action: {fault.action!r} acts on one node's own network-namespace link; it needs "
        "workload.placement.broker as a list of network-namespace hosts, one per node (node i on the i-th: "
        "e.g. [b1, b2, b3] with hosts b1..b3 each given a netns)"
        for i, fault in enumerate(faults)
        if fault.action in ON_THE_LINK and not node_links
    ]


def check_fault_nodes(faults: Sequence[FaultSpec], nodes: Collection[int] | None) -> list[str]:
    """`node:N` targets the cell's brokers do not have, and a `follower` of a single node (`nodes`: their ids; None:
    not known before they start)."""
    if nodes is None:
        return []
    known = ", ".join(f"node:{n}" for n in sorted(nodes))
    missing = [
        f"faults[{i}].target: {fault.target!r} — this cell's nodes are {known}"
        for i, fault in enumerate(faults)
        if fault.node is not None and fault.node not in nodes
    ]
    lone = [
        f"faults[{i}].target: 'follower' — this cell has one node ({known}), which leads everything"
        for i, fault in enumerate(faults)
        if fault.target == "follower" and len(nodes) < 2
    ]
    return missing + lone
