"""A cell's placement made concrete: which namespace and route each worker gets, and what is recorded about it.

`placement` says what the matrix asks for; `netns` builds namespaces. This module joins them for one cell:
the broker's namespace and bind address, each worker's namespace and route (in a cell whose producers span
several clock domains, each domain's producers and consumers share a route of their own, `d_<domain>`),
and the `hosts` context landed with the result (placement, addresses, clock domains, link counters).
"""

from __future__ import annotations

import socket
from typing import Any

from . import netns
from .drivers import MEASURED
from .matrix import Cell
from .placement import domain_of, domain_routes

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
    """(namespace, bind address) of the broker: ('', 127.0.0.1) when it runs locally."""
    placement = cell.spec.workload.placement
    if topo is None or placement is None or placement.broker not in topo.hosts:
        return "", LOOPBACK
    return topo.netns_of(placement.broker), topo.address_of(placement.broker)


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
    cell: Cell, topo: netns.Topology | None, stats: dict[str, Any] | None = None, clock_offsets: list | None = None
) -> dict[str, Any] | None:
    """What lands with the result about where the cell ran; None for a cell without a placement."""
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
            else "each host its own clock domain unless hosts name a shared clock_domain"
        ),
        "domain_routes": cell_routes(cell),
        "network": topo.network if topo else None,
        "link_stats": stats or {},
        "clock_offsets": clock_offsets or [],
    }


def generator_queue(cell: Cell) -> str | None:
    """The Airflow queue of the tasks that start and watch the cell's generator: its load hosts' queue (the
    first producer host's, when namespace hosts of one machine name several); None leaves the default queue.
    Real hosts on several queues would need one generator per host, which does not exist yet: `check_runnable`
    refuses such a cell when it starts."""
    placement, known = cell.spec.workload.placement, cell.spec.hosts or {}
    if placement is None or not placement.load_hosts():
        return None
    return known[placement.load_hosts()[0]].queue


def check_runnable(cell: Cell) -> None:
    """Refuse a placement this harness cannot realise yet: load roles on several real (non-namespace) hosts."""
    placement, known = cell.spec.workload.placement, cell.spec.hosts or {}
    if placement is None or uses_netns(cell):
        return
    queues = {known[h].queue for h in placement.load_hosts()}
    if len(queues) > 1:
        from .errors import CellError

        raise CellError(
            cell.id,
            f"workload.placement: load roles on hosts of several queues ({', '.join(sorted(queues))}) need one "
            "generator per host, which is not implemented yet; place the load on one host, or use netns hosts",
        )


def measure_clock_offsets(cell: Cell, topo: netns.Topology | None) -> list[dict[str, Any]]:
    """Where the matrix accepts one-way latency across clock domains: the offset of every consumer host's
    clock from every producer host's in another domain, measured over the hosts' own network (a UDP clock
    server in the consumer host, a client in the producer host). Empty otherwise."""
    spec = cell.spec
    placement, known = spec.workload.placement, spec.hosts or {}
    if placement is None or placement.cross_host_clock != "measure_offset" or spec.measurement not in ("e2e", "chain"):
        return []
    from .clock import ClockServer, measure

    out = []
    for to_host in dict.fromkeys(placement.consumers):
        with netns.inside(topo.netns_of(to_host) if topo else ""):
            server_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            server_sock.bind((_address(topo, to_host), 0))
        server = ClockServer(server_sock).start()
        try:
            for from_host in dict.fromkeys(placement.producers):
                if domain_of(known, from_host) == domain_of(known, to_host):
                    continue
                with netns.inside(topo.netns_of(from_host) if topo else ""):
                    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    client.bind((_address(topo, from_host), 0))
                with client:
                    out.append(measure(client, server.address, from_host, to_host).to_dict())
        finally:
            server.stop()
    return out


def _address(topo: netns.Topology | None, host: str) -> str:
    return topo.address_of(host) if topo is not None and host in topo.hosts else LOOPBACK
