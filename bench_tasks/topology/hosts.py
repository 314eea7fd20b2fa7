"""What is recorded about where a cell ran, and the clock offsets measured between its hosts.

`plan` resolves where each role runs; this module turns a plan and what the run saw into the `hosts` context
landed with the result (placement, addresses, clock domains, link counters), and measures the offsets between
hosts' clocks where the matrix accepts one-way latency across clock domains.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from ..spec.matrix_model import Cell
from ..spec.placement import domain_of
from . import netns
from .plan import LOOPBACK, PlacementPlan, advertised_address

if TYPE_CHECKING:
    from .rendezvous import HostPart


def hosts_context(
    cell: Cell,
    plan: PlacementPlan,
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
    hosts, topo = spec.hosts or {}, plan.topology
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
            if plan.per_host
            else "each host its own clock domain unless hosts name a shared clock_domain"
        ),
        "generators": generators or {},
        "domain_routes": list(plan.routes),
        "network": topo.network if topo else None,
        "link_stats": stats or {},
        "clock_offsets": clock_offsets or [],
    }


PER_HOST_CLOCK = (
    "one generator per real host; each stamps on its host clock (CLOCK_MONOTONIC moved onto the wall-clock epoch "
    "once per host), so one-way latency between hosts of a clock domain is as true as their wall clocks agree; "
    "each host its own clock domain unless hosts name a shared clock_domain"
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


def _address(topo: netns.Topology | None, host: str) -> str:
    return topo.address_of(host) if topo is not None and host in topo.hosts else LOOPBACK
