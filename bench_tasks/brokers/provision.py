"""Provision the brokers a cell needs: started by its system, or reached through a connection when external."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..spec.matrix_model import Cell
from ..systems import system_of
from .external import ExternalBrokers
from .handles import BrokerHandle, NodeBrokers
from .process import stopped_on_failure


def provision(
    cell: Cell,
    workdir: Path,
    tie_to_parent: bool = True,
    host: str = "127.0.0.1",
    run_id: str = "",
    netns: str = "",
    sites: Mapping[int, tuple[str, str]] | None = None,
) -> BrokerHandle:
    """Start what `cell` needs and return once it is ready for traffic. `host`: the address every broker node
    listens on and advertises (its host's address when it runs in a network namespace); `netns`: that
    namespace, which the calling thread must already be in (the nodes are forked from it) and from which leaders
    are asked later. `sites`: with one host per node, node id -> (namespace, address) of each node; `netns` is then
    the switch namespace that reaches them all. External brokers: only the cell's routes are created (named after
    `run_id` too)."""
    spec = cell.spec
    if spec.brokers == "external":
        return ExternalBrokers.for_run(cell, run_id, workdir).start()
    system = system_of(spec)
    started = system.start_brokers(spec, cell.instance, workdir, tie_to_parent, host, sites)
    with stopped_on_failure(started.nodes.stop, f"the {system.name} brokers of cell {cell.id}"):
        node_netns = {node: site[0] for node, site in (sites or {}).items()}
        return NodeBrokers(system, started, netns, node_netns)


def reuse_for(cell: Cell, state: dict[str, Any]) -> dict[str, Any]:
    """A reused cluster's state made this cell's: the route whose leaders are watched and faulted is the new
    cell's, not the one of the cell that started the cluster."""
    return {**state, "leader": system_of(cell.spec).retarget_leader(state.get("leader"), cell.spec, cell.instance)}


def attach(state: Mapping[str, Any]) -> BrokerHandle:
    """The brokers recorded in `state` (any handle's `state()`), for another process to drive."""
    if state.get("kind") == "external":
        return ExternalBrokers.attached(state)
    return NodeBrokers.attached(state, system_of(state))
