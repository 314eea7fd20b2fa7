"""Where a cell's roles run: named load-generator hosts, the broker's host, clock domains and a bandwidth cap.

A matrix's top-level `hosts:` names hosts (`{queue: <airflow queue>, netns: <network namespace>}`); a cell's
`workload.placement` puts its broker, producers and consumers on them (producer/consumer i goes to the i-th
listed host, round robin). Without a placement everything runs locally, as before, and the cell spec (hence
its id) is unchanged: the host map and the `network:` block enter a cell only when its placement uses them.

Clocks: one-way latency (e2e, chain) subtracts a sender's timestamp from a receiver's, which is only
meaningful inside one clock domain. Each host is its own domain unless it names one (`clock_domain`, e.g.
hosts disciplined by the same PTP grandmaster). Network namespaces on one machine do share the kernel's
CLOCK_MONOTONIC, which is recorded with the result, but the rule is applied by declared domain all the same,
so a matrix that passes here also means what it says on real hosts. Each domain's producers publish on
their own subject/topic and its consumers read only that one, so every one-way sample stays in its domain
(Redpanda's "swarm" shape). A matrix may instead accept a measured clock offset
(`cross_host_clock: measure_offset`), which is then measured and recorded with the result.

`network:` caps every namespace link with `tc tbf` (both directions). netem (delay, loss) does not exist on
this machine's kernel, so delay and loss are refused with that reason rather than silently ignored.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .base import SettingsModel, StrictModel

HOST_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
NETNS_NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,15}$")
DEFAULT_QUEUE = "default"
NETEM_MISSING = (
    "tc netem (delay, loss) is not available on this machine's kernel ('Specified qdisc kind is unknown'); "
    "only a bandwidth cap (tc tbf: rate_mbit, burst_kb, latency_ms) can be applied"
)


class Host(SettingsModel):
    """A load-generator (or broker) host: the Airflow queue its tasks run on and, on a single machine, the
    network namespace that stands in for it."""

    queue: str = Field(DEFAULT_QUEUE, min_length=1, description="Airflow queue of the worker on this host")
    netns: str | None = Field(
        None, description="realise this host locally as a network namespace of this name (made unique per run)"
    )
    clock_domain: str | None = Field(None, description="hosts naming the same domain share a clock; default: own")

    @field_validator("netns")
    @classmethod
    def _netns_name(cls, value: str | None) -> str | None:
        if value is not None and not NETNS_NAME.match(value):
            raise ValueError("use 1-16 lower case letters, digits and underscores")
        return value


class Network(StrictModel):
    """A bandwidth cap on every network-namespace link (tc tbf, applied on both ends of each link)."""

    rate_mbit: float = Field(gt=0, description="link rate in Mbit/s (10^6 bit/s)")
    burst_kb: int | None = Field(None, gt=0, description="tbf bucket in KiB; default: 10 ms at the rate, >= 16 KiB")
    latency_ms: float = Field(
        50.0, gt=0, description="tbf queue limit: the longest a packet may wait in the shaper (not an added delay)"
    )
    delay_ms: float | None = Field(None, description="not available here (needs netem)")
    loss_percent: float | None = Field(None, description="not available here (needs netem)")

    @model_validator(mode="after")
    def _no_netem(self) -> Network:
        wanted = [k for k in ("delay_ms", "loss_percent") if getattr(self, k) is not None]
        if wanted:
            raise ValueError(f"{', '.join(wanted)}: {NETEM_MISSING}")
        return self

    def burst_bytes(self) -> int:
        return (self.burst_kb * 1024) if self.burst_kb else max(16 * 1024, int(self.rate_mbit * 1e6 / 8 / 100))


class Placement(StrictModel):
    """Which host runs what. Empty lists (and no broker) mean: locally, as without a placement."""

    broker: str | list[str] | None = Field(
        None,
        description="host of the broker (every node of a cluster), or one host per node (node i on the i-th host: "
        "each node in a network namespace of its own, which `partition` and `bandwidth` faults need)",
    )
    producers: list[str] = Field(default_factory=list, description="hosts; producer i runs on host i mod n")
    consumers: list[str] = Field(
        default_factory=list, description="hosts; consumer/responder i runs on host i mod n (relays go with them)"
    )
    cross_host_clock: Literal["refuse", "measure_offset"] = Field(
        "refuse",
        description="one-way latency across clock domains: refuse the cell, or measure and record the offset",
    )

    def host_of(self, role: str, index: int) -> str | None:
        """The host of the `index`-th worker of `role` (None: local). Relays, laggards and background consumers
        go with the consumers; background producers with the producers."""
        hosts = self.producers if role in ("producer", "background") else self.consumers
        return hosts[index % len(hosts)] if hosts else None

    def broker_hosts(self) -> list[str]:
        """The broker's host(s), in node order when there is one per node."""
        if self.broker is None:
            return []
        return [self.broker] if isinstance(self.broker, str) else list(self.broker)

    def per_node(self) -> bool:
        """Each broker node on a host of its own (`broker` is a list)."""
        return isinstance(self.broker, list)

    def load_hosts(self) -> list[str]:
        return list(dict.fromkeys(self.producers + self.consumers))

    def all_hosts(self) -> list[str]:
        return list(dict.fromkeys(self.broker_hosts() + self.load_hosts()))


def domain_of(hosts: dict[str, Host], name: str) -> str:
    return hosts[name].clock_domain or name


def check_placement(
    placement: Placement,
    hosts: dict[str, Host],
    network: Network | None,
    measurement: str,
    producers: int,
    consumers: int,
) -> list[str]:
    """Every problem of a cell's placement, each naming its field; empty when it is sound."""
    known = ", ".join(sorted(hosts)) or "(none)"
    problems = []
    if not hosts:
        return ["workload.placement: needs a top-level `hosts:` map naming the hosts it uses"]
    for field in ("producers", "consumers"):
        for name in getattr(placement, field):
            if name not in hosts:
                problems.append(f"workload.placement.{field}: unknown host {name!r}; hosts: {known}")
    for name in placement.broker_hosts():
        if name not in hosts:
            problems.append(f"workload.placement.broker: unknown host {name!r}; hosts: {known}")
    problems += _node_host_problems(placement, hosts)
    if problems:
        return problems
    if len(placement.producers) > producers:
        problems.append(
            f"workload.placement.producers: {len(placement.producers)} hosts for workload.producers={producers}; "
            "a listed host would run no producer"
        )
    if len(placement.consumers) > consumers:
        problems.append(
            f"workload.placement.consumers: {len(placement.consumers)} hosts for workload.consumers={consumers}; "
            "a listed host would run no consumer"
        )
    used = placement.all_hosts()
    in_netns = [h for h in used if hosts[h].netns]
    if in_netns:
        local = [h for h in used if not hosts[h].netns]
        if local:
            problems.append(
                f"workload.placement: hosts {', '.join(in_netns)} are network namespaces but {', '.join(local)} "
                "is not; a cell uses namespace hosts only or real hosts only"
            )
        if placement.broker is None:
            problems.append(
                "workload.placement.broker: required when roles run in network namespaces "
                "(they cannot reach a broker left in the root namespace)"
            )
        names = [hosts[h].netns for h in in_netns]
        if len(set(names)) != len(names):
            problems.append("hosts: two placed hosts share one netns name; each host needs its own")
    if network is not None and not in_netns:
        problems.append("network: caps links between network-namespace hosts; place the cell's roles on such hosts")
    problems += _clock_problems(placement, hosts, measurement)
    return problems


def _node_host_problems(placement: Placement, hosts: dict[str, Host]) -> list[str]:
    """One host per broker node: distinct hosts, each a network namespace (real hosts run one broker each, which the
    harness does not start)."""
    if not placement.per_node():
        return []
    names = placement.broker_hosts()
    if not names:
        return ["workload.placement.broker: an empty list; name one host, or one host per node"]
    if len(set(names)) != len(names):
        return [f"workload.placement.broker: {names} names a host twice; one host per node, each its own"]
    local = [h for h in names if h in hosts and not hosts[h].netns]
    if local:
        return [
            f"workload.placement.broker: one host per node needs network-namespace hosts (`netns`); "
            f"{', '.join(local)} is not"
        ]
    return []


def check_node_hosts(placement: Placement | None, nodes: list[int] | None, system: str, supported: bool) -> list[str]:
    """A per-node broker placement the system can start (`supported`) with as many hosts as the cell has nodes
    (`nodes`: their ids; None: not known before they start)."""
    if placement is None or not placement.per_node():
        return []
    field = "workload.placement.broker"
    if not supported:
        return [f"{field}: one host per node is not supported by {system}; name one host (every node on it)"]
    count = len(placement.broker_hosts())
    if nodes is None:
        return [f"{field}: {system} cannot say before starting how many nodes these broker settings give"]
    if count != len(nodes):
        return [f"{field}: {count} hosts for {len(nodes)} node(s) ({', '.join(f'node:{n}' for n in nodes)}); "
                "list one host per node, in node order"]  # fmt: skip
    return []


def _clock_problems(placement: Placement, hosts: dict[str, Host], measurement: str) -> list[str]:
    """One-way latency only inside a clock domain: the consumers of every producer's domain must be there."""
    if measurement not in ("e2e", "chain") or placement.cross_host_clock == "measure_offset":
        return []
    if not placement.producers and not placement.consumers:
        return []
    sending = {domain_of(hosts, h) for h in placement.producers} if placement.producers else {"(local)"}
    reading = {domain_of(hosts, h) for h in placement.consumers} if placement.consumers else {"(local)"}
    problems = []
    if sending != reading:
        problems.append(
            f"workload.placement: measurement {measurement!r} is one-way latency, but producers run in clock "
            f"domain(s) {', '.join(sorted(sending))} and consumers in {', '.join(sorted(reading))}: a sample would "
            "subtract one host's clock from another's. Use measurement rtt, or place consumers with producers "
            "(every producer host's clock domain needs consumers), or accept a measured offset with "
            "workload.placement.cross_host_clock: measure_offset"
        )
    elif measurement == "chain" and len(sending) > 1:
        problems.append(
            "workload.placement: measurement 'chain' with producers in several clock domains is not supported; "
            "place the chain's producers and consumers in one domain"
        )
    return problems


def domain_routes(placement: Placement | None, hosts: dict[str, Host] | None, measurement: str) -> list[str]:
    """Clock domains that get a subject/topic of their own (empty: everyone shares the measured route).
    Only for e2e with producers in several domains, unless the offset is measured instead."""
    if placement is None or not hosts or measurement != "e2e" or placement.cross_host_clock == "measure_offset":
        return []
    domains = list(dict.fromkeys(domain_of(hosts, h) for h in placement.producers))
    return domains if len(domains) > 1 else []
