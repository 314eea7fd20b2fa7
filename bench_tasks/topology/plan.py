"""A cell's placement resolved once: where its broker and each of its workers run, and what can run at all.

The matrix says where roles go (`spec.placement`: hosts, clock domains, a cap); running a cell needs that made
concrete: which network namespaces it gets and their addresses, where the broker listens and where the harness
reaches it from, each worker's namespace and route, the broker nodes' own links, the Airflow queue of each host,
and whether this cell can run at all with its load on real hosts. `resolve_placement` decides all of it from the
cell in one place, before anything is built; every step of the cell then reads the plan instead of asking the spec
again. Provision resolves it (naming the namespaces after the cell's work folder) and records it in `state.json`
for the steps that run later in other processes, and in the hosts folder for the load hosts (`to_dict`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..errors import CellError
from ..load.routes import MEASURED
from ..spec.matrix_model import Cell
from ..spec.placement import Placement, domain_of, domain_routes
from .links import NodeLinks
from .netns import CONTROL_ADDRESS, Topology, layout

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class PlacementPlan:
    """Where one cell runs. `topology` is None when it runs in the root namespace (locally, or on real hosts)."""

    cell_id: str
    placement: Placement | None  # the matrix's: which host each role's i-th worker runs on (round robin)
    per_host: bool  # load on real hosts: one generator per host, each on its host's queue, meeting in the lake
    load_hosts: tuple[str, ...]  # hosts running producers or consumers, in placement order
    queues: Mapping[str, str]  # host -> Airflow queue of its worker
    generator_queue: str | None  # queue of the tasks that start and watch a namespace cell's one generator
    host_routes: Mapping[str, str]  # host -> its clock domain's own route; empty: every worker on one route
    routes: tuple[str, ...]  # those per-domain routes, prepared beside the measured one
    topology: Topology | None  # the namespaces, bridge, links and cap, laid out (provision creates them)
    broker_netns: str  # where the broker starts and the harness reaches it from ('' : the root namespace)
    broker_address: str | None  # where it listens; None: this host's advertised address (load on real hosts)
    node_hosts: Mapping[int, str]  # node id -> its own host, with one broker host per node; else empty
    refusal: str | None  # why this cell cannot run as placed (checked when it starts); None: it can

    @property
    def uses_netns(self) -> bool:
        """Some placed host is a network namespace on this machine: the cell gets namespaces of its own."""
        return self.topology is not None

    def broker_site(self) -> tuple[str, str]:
        """(namespace, bind address) of the broker. This host's address, for load on real hosts, is asked here
        rather than at resolution: it is where this machine is reached, which only the provisioning host knows
        (and the DAG, which resolves plans at parse time, must not look it up)."""
        return self.broker_netns, self.broker_address or advertised_address()

    @property
    def node_sites(self) -> dict[int, tuple[str, str]] | None:
        """Node id -> (namespace, address) each broker node runs in and listens on; None when the nodes share a
        host."""
        if self.topology is None or not self.node_hosts:
            return None
        topo = self.topology
        return {node: (topo.netns_of(host), topo.address_of(host)) for node, host in self.node_hosts.items()}

    def node_links(self) -> NodeLinks | None:
        """The broker nodes' own links, which `partition` and `bandwidth` faults act on; None without them. A
        fresh one each time: it records what its faults cut and squeezed."""
        if self.topology is None or not self.node_hosts:
            return None
        return NodeLinks(self.topology, dict(self.node_hosts))

    def host_of(self, role: str, index: int) -> str | None:
        """The host of the `index`-th worker of `role`; None: local."""
        return self.placement.host_of(role, index) if self.placement else None

    def worker_netns(self, role: str, index: int) -> str:
        """The namespace the worker enters before it opens a socket ('' : the root namespace)."""
        return self.topology.netns_of(self.host_of(role, index)) if self.topology is not None else ""

    def worker_route(self, role: str, index: int, default: str = MEASURED) -> str:
        """A producer's or consumer's route: its clock domain's own in a multi-domain e2e cell, else `default`."""
        host = self.host_of(role, index)
        if role not in ("producer", "consumer") or not self.host_routes or host is None:
            return default
        return self.host_routes[host]

    def queue_of(self, host: str) -> str:
        return self.queues[host]

    def check_runnable(self) -> None:
        """Raise the refusal, when the cell starts: a DAG resolves plans at parse time and must not fail there."""
        if self.refusal is not None:
            raise CellError(self.cell_id, self.refusal)

    def to_dict(self) -> dict[str, Any]:
        """JSON for `state.json` and the hosts folder, read back by `from_dict`."""
        return {
            **{f.name: getattr(self, f.name) for f in fields(self)},
            "placement": self.placement.model_dump(mode="json") if self.placement else None,
            "topology": self.topology.to_dict() if self.topology else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlacementPlan:
        return cls(
            **{
                **data,
                "placement": Placement.model_validate(data["placement"]) if data["placement"] else None,
                "load_hosts": tuple(data["load_hosts"]),
                "routes": tuple(data["routes"]),
                "topology": Topology.from_dict(data["topology"]) if data["topology"] else None,
                "node_hosts": {int(node): host for node, host in data["node_hosts"].items()},
            }
        )


def resolve_placement(cell: Cell, token: str | None = None, faults: Sequence[Any] = ()) -> PlacementPlan:
    """The cell's plan. `token` names its namespaces (a fresh one if None: the layout is only a plan until
    `netns.create`); `faults`: what the run will inject (the caller's and the matrix's), which real hosts refuse."""
    spec = cell.spec
    placement, hosts = spec.workload.placement, spec.hosts or {}
    used = placement.all_hosts() if placement else []
    topology = layout(hosts, used, spec.network, token) if any(hosts[h].netns for h in used) else None
    loading = tuple(placement.load_hosts()) if placement else ()
    per_host = bool(loading) and topology is None
    queues = {name: host.queue for name, host in hosts.items()}
    domains = domain_routes(placement, spec.hosts, spec.measurement)
    placed = list(dict.fromkeys([*placement.producers, *placement.consumers])) if domains and placement else []
    netns, address = _broker_site(placement, topology, per_host)
    return PlacementPlan(
        cell_id=cell.id,
        placement=placement,
        per_host=per_host,
        load_hosts=loading,
        queues=queues,
        generator_queue=queues[loading[0]] if loading and not per_host else None,
        host_routes={host: route_of_domain(domain_of(hosts, host)) for host in placed},
        routes=tuple(route_of_domain(d) for d in domains),
        topology=topology,
        broker_netns=netns,
        broker_address=address,
        node_hosts=_node_hosts(cell),
        refusal=_refusal(cell, faults) if per_host else None,
    )


def _broker_site(placement: Placement | None, topology: Topology | None, per_host: bool) -> tuple[str, str | None]:
    """Locally 127.0.0.1; with load on real hosts the address they reach this host by, which every provisioned
    node listens on (None: asked when the broker starts); in a namespace its host's address. With one host per
    node, the switch namespace and the bridge's address: where the harness reaches every node from (`node_sites`
    says where each node runs)."""
    if topology is not None and placement is not None and placement.per_node():
        return topology.switch, CONTROL_ADDRESS
    if topology is None or placement is None or placement.broker not in topology.hosts:
        return "", None if per_host else LOOPBACK
    return topology.netns_of(placement.broker), topology.address_of(placement.broker)


def _node_hosts(cell: Cell) -> dict[int, str]:
    """Node id -> host, for a cell with one broker host per node (node ids in order, as the system numbers them)."""
    placement = cell.spec.workload.placement
    if placement is None or not placement.per_node():
        return {}
    nodes = cell.spec.FAULTS.nodes(cell.spec.broker) or []
    return dict(zip(nodes, placement.broker_hosts(), strict=True))


def _refusal(cell: Cell, faults: Sequence[Any]) -> str | None:
    """What one generator per real host cannot do: inject faults (the broker is not the load hosts' to signal),
    or reach provisioned brokers with secrets (their TLS files and throw-away SASL users live on the provisioning
    host; across hosts use `brokers: external` and a connection)."""
    if faults:
        return "faults (stall, kill): not with load on real hosts (workload.placement); use netns hosts"
    if cell.spec.background:
        return "background: not with load on real hosts (workload.placement) yet; use netns hosts"
    security = getattr(getattr(cell.spec, "client", None), "security", "plaintext")
    if cell.spec.brokers != "external" and security != "plaintext":
        return (
            f"client.security: {security} with load on real hosts needs brokers: external (a connection each host "
            "resolves); provisioned brokers keep their certificates and users on the provisioning host"
        )
    return None


def route_of_domain(domain: str) -> str:
    return f"d_{domain}"


def advertised_address() -> str:
    """This host's address as other hosts reach it: `SIXNINES_HOST_ADDRESS`, else what its name resolves to."""
    return os.environ.get("SIXNINES_HOST_ADDRESS") or socket.gethostbyname(socket.gethostname())


# One question of a cell's plan, for callers that ask only that one (the public API's names); a caller that asks
# more resolves the plan once and keeps it.
def per_host(cell: Cell) -> bool:
    """The cell's load runs on real hosts (not network namespaces): one generator per host."""
    return resolve_placement(cell).per_host


def load_hosts(cell: Cell) -> list[str]:
    return list(resolve_placement(cell).load_hosts)


def queue_of(cell: Cell, host: str) -> str:
    return resolve_placement(cell).queue_of(host)


def generator_queue(cell: Cell) -> str | None:
    """The Airflow queue of the tasks that start and watch a namespace-hosts cell's generator: the first load
    host's queue (namespace hosts all live on one machine); None leaves the default queue. A cell on real hosts
    has one generate task per host instead, each on its own host's queue (`queue_of`)."""
    return resolve_placement(cell).generator_queue
