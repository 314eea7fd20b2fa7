"""A cell's placement made concrete: which namespace and route each worker gets, and what is recorded about it.

`placement` says what the matrix asks for; `netns` builds namespaces. This module joins them for one cell:
the broker's namespace and bind address, each worker's namespace and route (in a cell whose producers span
several clock domains, each domain's producers and consumers share a route of their own, `d_<domain>`),
and the `hosts` context landed with the result (placement, addresses, clock domains, link counters).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..load.routes import MEASURED
from ..spec.matrix_model import Cell
from ..spec.placement import domain_of, domain_routes
from . import netns
from .links import NodeLinks

if TYPE_CHECKING:
    from .rendezvous import HostPart

LOOPBACK = "127.0.0.1"


def uses_netns(cell: Cell) -> bool:
    placement, hosts = cell.spec.workload.placement, cell.spec.hosts or {}
    return bool(placement and any(hosts[h].netns for h in placement.all_hosts()))


def build(cell: Cell, token: str | None = None) -> netns.Topology | None:
    """The namespaces, links and caps this cell needs (None when it runs in the root namespace)."""
    if not uses_netns(cell):
        return None
    placement = cell.spec.workload.placement
    assert placement is not None and cell.spec.hosts is not None
    return netns.build(cell.spec.hosts, placement.all_hosts(), cell.spec.network, token)


def broker_site(cell: Cell, topo: netns.Topology | None) -> tuple[str, str]:
    """(namespace, bind address) of the broker: ('', 127.0.0.1) when it runs locally, or with load on real hosts
    the address they reach this host by (`advertised_address`), which every provisioned node listens on. With one
    host per node, the switch namespace and the bridge's address: where the harness reaches every node from
    (`node_sites` says where each node runs)."""
    placement = cell.spec.workload.placement
    if topo is not None and placement is not None and placement.per_node():
        return topo.switch, netns.CONTROL_ADDRESS
    if topo is None or placement is None or placement.broker not in topo.hosts:
        return "", advertised_address() if per_host(cell) else LOOPBACK
    return topo.netns_of(placement.broker), topo.address_of(placement.broker)


def node_hosts(cell: Cell) -> dict[int, str]:
    """Node id -> host, for a cell with one broker host per node (node ids in order, as the system numbers them);
    empty otherwise."""
    placement = cell.spec.workload.placement
    if placement is None or not placement.per_node():
        return {}
    nodes = cell.spec.FAULTS.nodes(cell.spec.broker) or []
    return dict(zip(nodes, placement.broker_hosts(), strict=True))


def node_sites(cell: Cell, topo: netns.Topology | None) -> dict[int, tuple[str, str]] | None:
    """Node id -> (namespace, address) each broker node runs in and listens on; None when the nodes share a host."""
    placed = node_hosts(cell)
    if topo is None or not placed:
        return None
    return {node: (topo.netns_of(host), topo.address_of(host)) for node, host in placed.items()}


def node_links(cell: Cell, topo: netns.Topology | None) -> NodeLinks | None:
    """The broker nodes' own links, which `partition` and `bandwidth` faults act on; None without them."""
    placed = node_hosts(cell)
    return NodeLinks(topo, placed) if topo is not None and placed else None


def host_of(cell: Cell, role: str, index: int) -> str | None:
    placement = cell.spec.workload.placement
    return placement.host_of(role, index) if placement else None


def worker_netns(cell: Cell, topo: netns.Topology | None, role: str, index: int) -> str:
    return topo.netns_of(host_of(cell, role, index)) if topo is not None else ""


def worker_route(cell: Cell, role: str, index: int, default: str = MEASURED) -> str:
    """A producer's or receiver's route: its clock domain's own in a multi-domain e2e cell, else `default`."""
    spec = cell.spec
    if role not in ("producer", "consumer") or not domain_routes(spec.workload.placement, spec.hosts, spec.measurement):
        return default
    host = host_of(cell, role, index)
    assert host is not None and spec.hosts is not None
    return route_of_domain(domain_of(spec.hosts, host))


def route_of_domain(domain: str) -> str:
    return f"d_{domain}"


def cell_routes(cell: Cell) -> list[str]:
    """The per-domain routes of a cell (to be prepared beside the measured one)."""
    spec = cell.spec
    return [route_of_domain(d) for d in domain_routes(spec.workload.placement, spec.hosts, spec.measurement)]


def hosts_context(
    cell: Cell,
    topo: netns.Topology | None,
    stats: dict[str, Any] | None = None,
    clock_offsets: list | None = None,
    generators: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """What lands with the result about where the cell ran; None for a cell without a placement.
    `generators`: a cell on real hosts, each host's generator (queue, status, the shift of its host clock)."""
    spec = cell.spec
    placement = spec.workload.placement
    if placement is None:
        return None
    hosts = spec.hosts or {}
    w = spec.workload
    roles = {
        "producers": {i: placement.host_of("producer", i) for i in range(w.producers)},
        "consumers": {i: placement.host_of("consumer", i) for i in range(w.consumers)},
    }
    return {
        "placement": placement.model_dump(mode="json"),
        "roles": roles,
        "hosts": {
            name: {
                **host.model_dump(mode="json"),
                "clock_domain": domain_of(hosts, name),
                "netns_name": topo.netns_of(name) if topo else None,
                "address": topo.address_of(name) if topo and name in topo.hosts else None,
            }
            for name, host in hosts.items()
        },
        "clock": (
            "network namespaces of one machine: one kernel, one CLOCK_MONOTONIC (one-way latency is still only "
            "computed inside a declared clock domain)"
            if topo is not None
            else PER_HOST_CLOCK
            if per_host(cell)
            else "each host its own clock domain unless hosts name a shared clock_domain"
        ),
        "generators": generators or {},
        "domain_routes": cell_routes(cell),
        "network": topo.network if topo else None,
        "link_stats": stats or {},
        "clock_offsets": clock_offsets or [],
    }


def per_host(cell: Cell) -> bool:
    """The cell's load runs on real hosts (not network namespaces): one generator per host, each on its
    host's Airflow queue, meeting through the lake (`hostparts`)."""
    placement = cell.spec.workload.placement
    return bool(placement and placement.load_hosts() and not uses_netns(cell))


def load_hosts(cell: Cell) -> list[str]:
    placement = cell.spec.workload.placement
    return placement.load_hosts() if placement else []


def queue_of(cell: Cell, host: str) -> str:
    return (cell.spec.hosts or {})[host].queue


PER_HOST_CLOCK = (
    "one generator per real host; each stamps on its host clock (CLOCK_MONOTONIC moved onto the wall-clock epoch "
    "once per host), so one-way latency between hosts of a clock domain is as true as their wall clocks agree; "
    "each host its own clock domain unless hosts name a shared clock_domain"
)


def generator_queue(cell: Cell) -> str | None:
    """The Airflow queue of the tasks that start and watch a namespace-hosts cell's generator: the first load
    host's queue (namespace hosts all live on one machine); None leaves the default queue. A cell on real hosts
    has one generate task per host instead, each on its own host's queue (`queue_of`)."""
    hosts = load_hosts(cell)
    return queue_of(cell, hosts[0]) if hosts and not per_host(cell) else None


def check_runnable(cell: Cell, faults: Sequence[Any] = ()) -> None:
    """Refuse, when the cell starts, what one generator per real host cannot do: inject faults (the broker is
    not the load hosts' to signal), or reach provisioned brokers with secrets (their TLS files and throw-away
    SASL users live on the provisioning host; across hosts use `brokers: external` and a connection)."""
    if not per_host(cell):
        return
    from ..errors import CellError

    if faults:
        raise CellError(
            cell.id, "faults (stall, kill): not with load on real hosts (workload.placement); use netns hosts"
        )
    if cell.spec.background:
        raise CellError(cell.id, "background: not with load on real hosts (workload.placement) yet; use netns hosts")
    security = getattr(getattr(cell.spec, "client", None), "security", "plaintext")
    if cell.spec.brokers != "external" and security != "plaintext":
        raise CellError(
            cell.id,
            f"client.security: {security} with load on real hosts needs brokers: external (a connection each host "
            "resolves); provisioned brokers keep their certificates and users on the provisioning host",
        )


def clock_offsets(cell: Cell, topo: netns.Topology | None = None, part: HostPart | None = None) -> list[dict[str, Any]]:
    """Where the matrix accepts one-way latency across clock domains (`cross_host_clock: measure_offset`): the
    offset of every consumer host's clock from every producer host's in another domain, measured NTP-style over
    the hosts' own network (a UDP clock server on the consumer host, a client on the producer host). On one
    machine (namespaces, `topo`) both ends run here; on real hosts (`part`) each host plays its own ends, on the
    host clock, meeting through the rendezvous. Empty when nothing needs measuring."""
    pairs = offset_pairs(cell)
    if not pairs:
        return []
    return _across_hosts(pairs, part) if part is not None else _on_this_machine(pairs, topo)


def offset_pairs(cell: Cell) -> list[tuple[str, str]]:
    """(producer host, consumer host) pairs in different clock domains whose offset the cell measures."""
    spec = cell.spec
    placement, known = spec.workload.placement, spec.hosts or {}
    if placement is None or placement.cross_host_clock != "measure_offset" or spec.measurement not in ("e2e", "chain"):
        return []
    return [
        (producer, consumer)
        for consumer in dict.fromkeys(placement.consumers)
        for producer in dict.fromkeys(placement.producers)
        if domain_of(known, producer) != domain_of(known, consumer)
    ]


def _on_this_machine(pairs: list[tuple[str, str]], topo: netns.Topology | None) -> list[dict[str, Any]]:
    from .clock import ClockServer, measure

    out = []
    for to_host in dict.fromkeys(to for _, to in pairs):
        server = None
        try:
            with netns.inside(topo.netns_of(to_host) if topo else ""):
                server = ClockServer.bound(_address(topo, to_host)).start()
            for from_host in (frm for frm, to in pairs if to == to_host):
                with netns.inside(topo.netns_of(from_host) if topo else ""):
                    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    client.bind((_address(topo, from_host), 0))
                with client:
                    out.append(measure(client, server.address, from_host, to_host, nonce=server.nonce).to_dict())
        finally:
            if server is not None:
                server.stop()
    return out


def _across_hosts(pairs: list[tuple[str, str]], part: HostPart) -> list[dict[str, Any]]:
    """This host's ends: a consumer host serves its clock on its advertised address (address and the server's
    nonce noted in the rendezvous) until every producer host that needs it has measured it; a producer host
    measures the servers of its pairs."""
    from . import HOSTS_TIMEOUT_S
    from .clock import measure

    me, sync = part.host, part.rendezvous
    targets = tuple(to for frm, to in pairs if frm == me)
    needing = tuple(frm for frm, to in pairs if to == me)
    server = None
    out: list[dict[str, Any]] = []
    try:
        if needing:
            server = _clock_server(part)
            sync.note("clock", {"address": list(server.address), "nonce": server.nonce.hex()})
        if targets:
            servers = sync.wait("clock", HOSTS_TIMEOUT_S, targets, hint="consumer hosts serve their clock")
            for host in targets:
                address, nonce = tuple(servers[host]["address"]), bytes.fromhex(servers[host]["nonce"])
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
                    offset = measure(client, address, me, host, clock=part.clock, method=HOST_CLOCK_METHOD, nonce=nonce)
                out.append(offset.to_dict())
        if any(frm == me for frm, _ in pairs):
            sync.note("offsets", {"measured": len(out)})
        if server is not None:  # serve until every producer host that needs this clock has measured it
            sync.wait("offsets", HOSTS_TIMEOUT_S, needing, hint="producer hosts measure consumer hosts' clocks")
    finally:
        if server is not None:
            server.stop()
    return out


def _clock_server(part: HostPart) -> Any:
    """This host's clock server, on the address the other hosts reach it by (never every interface)."""
    from ..errors import NetworkError
    from .clock import ClockServer

    address = advertised_address()
    try:
        return ClockServer.bound(address, part.clock).start()
    except OSError as exc:
        raise NetworkError(
            f"host {part.host}: cannot serve its clock on {address} ({exc}); SIXNINES_HOST_ADDRESS must be an "
            "address of this host that the other load hosts reach"
        ) from None


HOST_CLOCK_METHOD = "udp ping-pong between hosts, min-rtt exchange, host clock (CLOCK_MONOTONIC on the wall epoch)"


def advertised_address() -> str:
    """This host's address as other hosts reach it: `SIXNINES_HOST_ADDRESS`, else what its name resolves to."""
    return os.environ.get("SIXNINES_HOST_ADDRESS") or socket.gethostbyname(socket.gethostname())


def _address(topo: netns.Topology | None, host: str) -> str:
    return topo.address_of(host) if topo is not None and host in topo.hosts else LOOPBACK
