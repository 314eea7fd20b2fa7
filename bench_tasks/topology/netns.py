"""Hosts on one machine: network namespaces joined by a bridge, so a cell's traffic crosses a real network stack.

Each placed host with a `netns` becomes a namespace `sixnines-<token>-<netns>`; a further namespace
`sixnines-<token>-sw` holds a Linux bridge, and every host is linked to it by a veth pair (`sx0` inside the
host, `p<i>` on the bridge). The bridge itself has the subnet's first address (`CONTROL_ADDRESS`): the harness
watches brokers whose nodes each have a host of their own from the switch namespace, which reaches every node
whose link is up and stays reachable when one node is cut off. Hosts get the next addresses of the private /24
`SUBNET` (the namespaces are isolated
from the root namespace and from every other run, so runs never collide on addresses). A `network:` cap adds
a `tc tbf` qdisc on both ends of every link, so each direction of each host's link is capped. netem (delay,
loss) does not exist on this machine's kernel.

Processes join a namespace with setns(2): a broker or worker is started from a thread that has entered it
(`inside`), or enters it itself first thing (`enter`), before it opens any socket. Namespaces on one machine
share the kernel's clocks (CLOCK_MONOTONIC included), which the cell records; the clock-domain rule of
`placement` is applied regardless.

Everything is created per cell under a token unique to it and removed by `destroy`, which also runs when
creation fails half way; `leftovers` lists any namespace of a token that survived.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import json
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import NetworkError
from ..spec.placement import Host, Network

PREFIX = "sixnines"
SUBNET = ipaddress.ip_network("10.99.0.0/24")
HOST_IF = "sx0"
CONTROL_ADDRESS = str(SUBNET.network_address + 1)  # the bridge's, in the switch namespace
_CLONE_NEWNET = 0x40000000
_NETNS_DIR = Path("/run/netns")


@dataclass
class NetnsHost:
    host: str
    netns: str  # the namespace's full (per-run) name
    address: str
    port: str  # the veth end on the bridge


@dataclass
class Topology:
    """A built set of namespaces: JSON-able, so another process (Airflow's teardown) can remove it."""

    token: str
    switch: str
    hosts: dict[str, NetnsHost] = field(default_factory=dict)
    network: dict[str, Any] | None = None

    def netns_of(self, host: str | None) -> str:
        """The namespace of a placed host; '' for the root namespace (no host, or a host not built here)."""
        return self.hosts[host].netns if host in self.hosts else ""

    def address_of(self, host: str) -> str:
        return self.hosts[host].address

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        hosts = {k: NetnsHost(**v) for k, v in data["hosts"].items()}
        return cls(data["token"], data["switch"], hosts, data.get("network"))

    def namespaces(self) -> list[str]:
        return [h.netns for h in self.hosts.values()] + [self.switch]


def _ip(*args: str) -> str:
    """Run `ip`/`tc` (args[0] names which); raise NetworkError with its message on failure."""
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        text = (done.stderr or done.stdout).strip()
        hint = " (network namespaces need root: CAP_SYS_ADMIN and CAP_NET_ADMIN)" if "ermi" in text else ""
        raise NetworkError(f"`{' '.join(args)}` failed: {text}{hint}")
    return done.stdout


def layout(hosts: dict[str, Host], used: list[str], network: Network | None, token: str | None = None) -> Topology:
    """The namespaces, addresses and bridge ports a cell's hosts get under `token` (a fresh one if None), decided
    before anything exists, so a cell's placement can name them (`plan`) and `create` only carries them out."""
    token = token or secrets.token_hex(4)
    topo = Topology(token, f"{PREFIX}-{token}-sw", network=network.model_dump(mode="json") if network else None)
    for index, name in enumerate(h for h in used if hosts[h].netns):
        topo.hosts[name] = NetnsHost(
            name, f"{PREFIX}-{token}-{hosts[name].netns}", str(SUBNET.network_address + index + 2), f"p{index}"
        )
    return topo


def create(topo: Topology) -> None:
    """Create the namespaces of a laid-out topology, the bridge, the links and the caps; what was created before a
    step failed is removed again (and nothing it did not create)."""
    if len(topo.hosts) + 2 > SUBNET.num_addresses:
        raise NetworkError(f"{len(topo.hosts)} hosts do not fit the subnet {SUBNET}")
    network = Network.model_validate(topo.network) if topo.network else None
    built = Topology(topo.token, topo.switch, network=topo.network)  # grows as it is created, for the undo
    try:
        _ip("ip", "netns", "add", topo.switch)
        _ip("ip", "-n", topo.switch, "link", "add", "br0", "type", "bridge")
        _ip("ip", "-n", topo.switch, "addr", "add", f"{CONTROL_ADDRESS}/{SUBNET.prefixlen}", "dev", "br0")
        _ip("ip", "-n", topo.switch, "link", "set", "lo", "up")
        _ip("ip", "-n", topo.switch, "link", "set", "br0", "up")
        for name, node in topo.hosts.items():
            netns = node.netns
            _ip("ip", "netns", "add", netns)
            built.hosts[name] = node
            _ip("ip", "link", "add", HOST_IF, "netns", netns, "type", "veth", "peer", "name", node.port, "netns",
                topo.switch)  # fmt: skip
            _ip("ip", "-n", topo.switch, "link", "set", node.port, "master", "br0", "up")
            _ip("ip", "-n", netns, "addr", "add", f"{node.address}/{SUBNET.prefixlen}", "dev", HOST_IF)
            _ip("ip", "-n", netns, "link", "set", "lo", "up")
            _ip("ip", "-n", netns, "link", "set", HOST_IF, "up")
            if network is not None:
                for ns, dev in ((netns, HOST_IF), (topo.switch, node.port)):
                    _ip("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                        f"{network.rate_mbit * 1000:.0f}kbit", "burst", str(network.burst_bytes()),
                        "latency", f"{network.latency_ms * 1000:.0f}us")  # fmt: skip
    except BaseException:
        destroy(built)
        raise


def link_stats(topo: Topology) -> dict[str, dict[str, Any]]:
    """Per host, what crossed its link (the host end's interface counters: `tx`/`rx` bytes and packets) and,
    when capped, each shaper's counters (`shaper.out` on the host end, `shaper.in` on the bridge end: bytes,
    packets, drops, overlimits), which show whether the cap bit."""
    out: dict[str, dict[str, Any]] = {}
    for name, node in topo.hosts.items():
        entry: dict[str, Any] = {}
        with contextlib.suppress(NetworkError, ValueError, IndexError, KeyError):
            link = json.loads(_ip("ip", "-n", node.netns, "-j", "-s", "link", "show", "dev", HOST_IF))[0]["stats64"]
            for way in ("tx", "rx"):
                entry[f"{way}_bytes"], entry[f"{way}_packets"] = link[way]["bytes"], link[way]["packets"]
        if topo.network is not None:
            entry["shaper"] = {}
            for end, (ns, dev) in {"out": (node.netns, HOST_IF), "in": (topo.switch, node.port)}.items():
                with contextlib.suppress(NetworkError, ValueError, IndexError):
                    q = json.loads(_ip("tc", "-n", ns, "-j", "-s", "qdisc", "show", "dev", dev))[0]
                    entry["shaper"][end] = {k: int(q.get(k, 0)) for k in ("bytes", "packets", "drops", "overlimits")}
        out[name] = entry
    return out


def destroy(topo: Topology) -> list[str]:
    """Remove the links and namespaces of `topo` (those that exist); returns what was removed. Idempotent."""
    removed = []
    existing = set(list_namespaces())
    if topo.switch in existing:
        for node in topo.hosts.values():  # veth pairs go with their namespace, but not always at once
            with contextlib.suppress(NetworkError):
                _ip("ip", "-n", topo.switch, "link", "del", node.port)
    for ns in topo.namespaces():
        if ns in existing:
            _ip("ip", "netns", "del", ns)
            removed.append(ns)
    left = sorted(set(topo.namespaces()) & set(list_namespaces()))
    if left:
        raise NetworkError(f"namespaces still present after removal: {', '.join(left)}")
    return removed


def list_namespaces() -> list[str]:
    """Names of every named network namespace (`ip netns list`)."""
    out = _ip("ip", "netns", "list")
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def leftovers(token: str) -> list[str]:
    return [ns for ns in list_namespaces() if ns.startswith(f"{PREFIX}-{token}-")]


def _setns(path: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    with open(path) as ns:
        if libc.setns(ns.fileno(), _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetworkError(f"setns({path}) failed: {os.strerror(err)}")


def enter(netns: str) -> None:
    """Move the calling thread (in a fresh, single-threaded worker: the process) into `netns` for good.
    Threads started afterwards inherit it."""
    path = _NETNS_DIR / netns
    if not path.exists():
        raise NetworkError(f"network namespace {netns!r} does not exist")
    _setns(path)


@contextlib.contextmanager
def inside(netns: str) -> Iterator[None]:
    """Run a block with the calling thread in `netns` (a no-op for ''), then come back. Children forked and
    threads started in the block stay in `netns`; sockets opened in it belong to it."""
    if not netns:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        enter(netns)
        try:
            yield
        finally:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.setns(home, _CLONE_NEWNET) != 0:
                raise NetworkError(f"could not return from namespace {netns}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(home)


def permitted() -> str | None:
    """None if this process may create network namespaces; otherwise why not (tests skip with it)."""
    probe = f"{PREFIX}-probe-{secrets.token_hex(3)}"
    try:
        _ip("ip", "netns", "add", probe)
    except (NetworkError, FileNotFoundError) as exc:
        return str(exc)
    _ip("ip", "netns", "del", probe)
    return None


def pids_in(name: str) -> list[int]:
    """Processes running in a namespace (`ip netns pids`)."""
    return [int(p) for p in _ip("ip", "netns", "pids", name).split()]


def stale_tokens() -> dict[str, list[str]]:
    """Namespaces of ours (by run token) in which no process runs any more: what a hard-killed run left.
    A cell that is just being built has idle namespaces for a moment too: clean only when no cell starts."""
    tokens: dict[str, list[str]] = {}
    for name in list_namespaces():
        parts = name.split("-", 2)
        if len(parts) == 3 and parts[0] == PREFIX:
            tokens.setdefault(parts[1], []).append(name)
    return {token: names for token, names in tokens.items() if not any(pids_in(n) for n in names)}


def clean_stale() -> list[str]:
    """Remove every namespace of a stale token (and with it its links); returns their names."""
    removed = []
    for names in stale_tokens().values():
        for name in names:
            with contextlib.suppress(NetworkError):  # another cleaner, or the kernel, was quicker
                _ip("ip", "netns", "del", name)
                removed.append(name)
    return removed
