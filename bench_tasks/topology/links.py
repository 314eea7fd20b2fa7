"""One broker node's own network-namespace link, cut (`partition`) or squeezed (`bandwidth`) while a fault lasts.

With one host per node (`workload.placement.broker: [b1, b2, b3]`) each node's namespace reaches the others, the
clients and the harness only through its veth pair to the bridge. A partition sets the bridge's end (`p<i>` in the
switch namespace) down: the node keeps its address and its sockets, but nothing crosses the link either way, so
its peers and clients see it fall silent (no reset), as a pulled cable looks. This machine's kernel has neither
netem nor tc classifiers nor iptables, so a whole link is the finest cut there is. A bandwidth squeeze replaces the
root qdisc of both ends of the link with a `tc tbf` at the fault's rate (the `network:` cap's burst and queue
rules); when it ends, the link gets the cell's own cap again, or none. `restore` puts every link back as it was
(the injector's close, whatever failed mid-fault); teardown removes the namespaces anyway.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NetworkError
from ..spec.placement import Network
from .netns import HOST_IF, Topology, _ip

SHAPER_COUNTERS = ("bytes", "packets", "drops", "overlimits")


@dataclass
class NodeLinks:
    """The links of a cell's broker nodes: `hosts` maps each node id to its placed host in `topo`."""

    topo: Topology
    hosts: Mapping[int, str]
    cut_nodes: set[int] = field(default_factory=set)
    squeezed: set[int] = field(default_factory=set)

    def _ends(self, node: int) -> list[tuple[str, str]]:
        """(namespace, device) of both ends of the node's link: the node's own end first, then the bridge's."""
        if node not in self.hosts:
            raise NetworkError(f"node {node} has no host of its own; nodes with one: {sorted(self.hosts)}")
        placed = self.topo.hosts[self.hosts[node]]
        return [(placed.netns, HOST_IF), (self.topo.switch, placed.port)]

    def cut(self, node: int) -> None:
        """The node's link down (the bridge's end): it is cut off from its peers, the clients and the harness."""
        namespace, port = self._ends(node)[1]
        self.cut_nodes.add(node)
        _ip("ip", "-n", namespace, "link", "set", port, "down")

    def mend(self, node: int) -> None:
        namespace, port = self._ends(node)[1]
        _ip("ip", "-n", namespace, "link", "set", port, "up")
        self.cut_nodes.discard(node)

    def squeeze(self, node: int, rate_mbit: float) -> None:
        """Both ends of the node's link shaped to `rate_mbit` (tc tbf, replacing the cell's cap while it lasts)."""
        shaper = Network(rate_mbit=rate_mbit)
        self.squeezed.add(node)
        for namespace, device in self._ends(node):
            _tbf(namespace, device, shaper)

    def release(self, node: int) -> dict[str, dict[str, int]]:
        """The squeeze's shaper counters per end (`out`: the node's end, what it sent; `in`: the bridge's end, what
        it was sent), then the link as it was: the cell's cap, or no shaper."""
        counters = {way: _counters(ns, dev) for way, (ns, dev) in zip(("out", "in"), self._ends(node), strict=True)}
        cap = Network.model_validate(self.topo.network) if self.topo.network else None
        for namespace, device in self._ends(node):
            if cap is not None:
                _tbf(namespace, device, cap)
            else:
                _ip("tc", "-n", namespace, "qdisc", "del", "dev", device, "root")
        self.squeezed.discard(node)
        return counters

    def restore(self) -> None:
        """Every cut link up and every squeezed one as it was; what can no longer be restored (the namespaces are
        gone) is skipped."""
        for node in sorted(self.cut_nodes):
            with contextlib.suppress(NetworkError):
                self.mend(node)
        for node in sorted(self.squeezed):
            with contextlib.suppress(NetworkError):
                self.release(node)


def _tbf(namespace: str, device: str, shaper: Network) -> None:
    _ip("tc", "-n", namespace, "qdisc", "replace", "dev", device, "root", "tbf", "rate",
        f"{shaper.rate_mbit * 1000:.0f}kbit", "burst", str(shaper.burst_bytes()),
        "latency", f"{shaper.latency_ms * 1000:.0f}us")  # fmt: skip


def _counters(namespace: str, device: str) -> dict[str, int]:
    """The root qdisc's counters on `device` (bytes, packets, drops, overlimits); empty if it cannot be read."""
    with contextlib.suppress(NetworkError, ValueError, IndexError):
        qdisc: dict[str, Any] = json.loads(_ip("tc", "-n", namespace, "-j", "-s", "qdisc", "show", "dev", device))[0]
        return {k: int(qdisc.get(k, 0)) for k in SHAPER_COUNTERS}
    return {}


def shaper_totals(counters: Mapping[str, Mapping[str, int]]) -> tuple[int, int]:
    """(drops, overlimits) of a squeeze, both ends summed."""
    return sum(c.get("drops", 0) for c in counters.values()), sum(c.get("overlimits", 0) for c in counters.values())
