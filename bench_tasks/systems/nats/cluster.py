"""A 3-node nats-server JetStream cluster, for R3 streams (a replicated stream survives one node).

The nodes share one address: 127.0.0.1, or the broker host's address when the cluster is started from a thread
inside that host's network namespace: clients in other namespaces reach it across the links, and the nodes' routes
and monitor ports use it too (so whoever watches the cluster must be in that namespace as well). Or each node has
a host of its own (`sites`: node -> (namespace, address)): it starts in its namespace and listens, routes and
serves its monitor on its own address, so every route crosses the bridge and one node's link can be cut; the
caller is then in a namespace that reaches every node (the switch's).
Each node gets its own client, route and monitor port, `server_name` n1..n3, its own JetStream store dir, and
explicit routes to the other two in one named cluster. Ready means more than "processes answer": every node's
`/healthz` is ok (which, clustered, already requires a meta leader and the node being current with it), all
nodes name the same meta leader, that leader sees both followers as current and neither offline in `/jsz`, and
every node's `/routez` reaches the other two by name. A stream created before that point can fail with "no
suitable peers"."""

from __future__ import annotations

import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...brokers.cluster import NodeCluster, stop_nodes
from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess, stopped_on_failure
from ...errors import BrokerError
from ...secrecy import redacted, write_secret
from ...topology.netns import inside
from .release import server_binary
from .server import render_config
from .settings import NatsBroker

CLUSTER_NAME = "sixnines"
NODES = 3


def node_name(index: int) -> str:
    """`server_name` of node `index` (1-based): what JetStream reports as a stream or meta leader."""
    return f"n{index}"


def node_index(name: str) -> int | None:
    """Inverse of `node_name`; None for a name this harness did not give (or an empty leader)."""
    if name.startswith("n") and name[1:].isdigit():
        return int(name[1:])
    return None


@dataclass(frozen=True)
class NodePorts:
    client: int
    cluster: int
    monitor: int


def cluster_settings(
    index: int,
    ports: list[NodePorts],
    store_dir: Path,
    broker: NatsBroker,
    cluster_name: str = CLUSTER_NAME,
    host: str | Sequence[str] = "127.0.0.1",
) -> dict[str, Any]:
    """nats-server config of node `index` (1-based) of the cluster whose ports are `ports` on `host` (one address
    for all, or each node's own, in node order): harness defaults, then `broker.server` verbatim on top (so a
    matrix can still override any native option)."""
    me = ports[index - 1]
    hosts = [host] * len(ports) if isinstance(host, str) else list(host)
    routes = [f"nats-route://{hosts[i - 1]}:{p.cluster}" for i, p in enumerate(ports, 1) if i != index]
    host = hosts[index - 1]
    js: dict[str, Any] = {"store_dir": str(store_dir)}
    if broker.sync_interval != "default":
        js["sync_interval"] = broker.sync_interval
    settings: dict[str, Any] = {
        "server_name": node_name(index),
        "listen": f"{host}:{me.client}",
        "http": f"{host}:{me.monitor}",
        "cluster": {"name": cluster_name, "listen": f"{host}:{me.cluster}", "routes": routes},
        "jetstream": js,
    }
    settings.update(broker.server)
    return settings


@dataclass(frozen=True)
class NatsNode:
    """One cluster member: how to reach it and the exact config it was given."""

    index: int
    name: str
    pid: int
    url: str
    monitor_url: str
    cluster_port: int
    version: str
    config: str
    log_path: str


@dataclass(frozen=True)
class NatsClusterEndpoint:
    """How to reach a running cluster, and what it is. Serialised to the broker state file (`state()`).

    `url` lists every node comma-separated (the harness's address string); nats-py wants a list, so the
    driver splits it (`servers_of`)."""

    url: str
    cluster_name: str
    version: str
    mode: str
    nodes: tuple[NatsNode, ...]
    ready_after_s: float  # from start() to the cluster ready as the module docstring defines it
    workdir: str

    @property
    def pids(self) -> dict[int, int]:
        return {node.index: node.pid for node in self.nodes}


def servers_of(url: str) -> list[str]:
    """The server list in a (possibly comma-separated) address: nats-py 2.x rejects a comma-joined string."""
    return [part.strip() for part in url.split(",") if part.strip()]


class NatsCluster(NodeCluster):
    """Three nats-server processes forming one JetStream cluster, for one cell (or one `brokers up`), on `host`."""

    KIND: ClassVar[str] = "NATS"
    STOP_GRACE_S: ClassVar[float] = 10.0

    def __init__(
        self,
        version: str,
        broker: NatsBroker,
        workdir: Path | str,
        tie_to_parent: bool = True,
        host: str = "127.0.0.1",
        sites: Mapping[int, tuple[str, str]] | None = None,
    ):
        """`sites`: node index -> (network namespace, address) when each node has a host of its own."""
        if broker.mode != "jetstream":
            raise BrokerError("a NATS cluster is started for JetStream only (broker.mode 'jetstream')")
        super().__init__(version, workdir, tie_to_parent, host)
        self.broker = broker
        self.sites = dict(sites) if sites else {i: ("", host) for i in range(1, NODES + 1)}
        if sorted(self.sites) != list(range(1, NODES + 1)):
            raise BrokerError(f"a NATS cluster's nodes are 1..{NODES}; sites were given for {sorted(self.sites)}")
        self.ports: list[NodePorts] = []
        self.endpoint: NatsClusterEndpoint | None = None

    def start(self, timeout_s: float = 30.0) -> NatsClusterEndpoint:
        """Start all three nodes and return once the cluster is ready. Call it from a thread that outlives the
        cluster: PR_SET_PDEATHSIG fires when the *thread* that started a process exits."""
        timeout_s = with_patience(timeout_s)
        if self.processes:
            raise BrokerError("this NATS cluster was already started; make a new NatsCluster")
        began = time.monotonic()
        binary = server_binary(self.version)
        self.ports = self._free_ports()
        addresses = [self._address(i) for i in range(1, NODES + 1)]
        configs: dict[int, str] = {}
        with stopped_on_failure(self.stop, "the NATS cluster"):
            for index in range(1, NODES + 1):
                home = self.workdir / node_name(index)
                shutil.rmtree(home, ignore_errors=True)  # a stale store holds another cluster's peers
                home.mkdir(parents=True)
                settings = cluster_settings(index, self.ports, home / "jetstream", self.broker, host=addresses)
                configs[index] = render_config(redacted(settings))  # recorded: passthrough secrets are not
                write_secret(home / "nats-server.conf", render_config(settings))  # passthrough may hold secrets
                argv = [str(binary), "-c", str(home / "nats-server.conf")]
                with inside(self.sites[index][0]):  # forked from this thread: the node starts in its namespace
                    self.processes[index] = BrokerProcess(argv, home / "nats-server.log", self.tie_to_parent)
            self._wait_ready(began + timeout_s, timeout_s)
            versions = {i: _get(self._monitor(i), "/varz")[1].get("version", "?") for i in self.processes}
            if set(versions.values()) != {self.version}:
                raise BrokerError(f"nats-server nodes report versions {versions}, expected {self.version}")
        self.endpoint = NatsClusterEndpoint(
            url=",".join(f"nats://{self._address(i)}:{p.client}" for i, p in enumerate(self.ports, 1)),
            cluster_name=CLUSTER_NAME,
            version=self.version,
            mode=self.broker.mode,
            nodes=tuple(
                NatsNode(
                    index=i,
                    name=node_name(i),
                    pid=proc.pid,
                    url=f"nats://{self._address(i)}:{self.ports[i - 1].client}",
                    monitor_url=self._monitor(i),
                    cluster_port=self.ports[i - 1].cluster,
                    version=versions[i],
                    config=configs[i],
                    log_path=str(proc.log_path),
                )
                for i, proc in self.processes.items()
            ),
            ready_after_s=round(time.monotonic() - began, 3),
            workdir=str(self.workdir),
        )
        return self.endpoint

    def _address(self, index: int) -> str:
        return self.sites[index][1]

    def _free_ports(self) -> list[NodePorts]:
        """Client, route and monitor ports for every node, free on its address in its namespace. Nodes that
        share a site get theirs from one call, so no two are handed the same port."""
        ports: dict[int, NodePorts] = {}
        for site in dict.fromkeys(self.sites.values()):
            nodes = [i for i, s in self.sites.items() if s == site]
            with inside(site[0]):
                flat = free_ports(3 * len(nodes), site[1])
            ports.update({i: NodePorts(*flat[3 * k : 3 * k + 3]) for k, i in enumerate(nodes)})
        return [ports[i] for i in range(1, NODES + 1)]

    def _monitor(self, index: int) -> str:
        return f"http://{self._address(index)}:{self.ports[index - 1].monitor}"

    def _wait_ready(self, deadline: float, timeout_s: float) -> None:
        waiting_for = "the nodes to answer"
        while time.monotonic() < deadline:
            for index, proc in self.processes.items():
                if not proc.alive():
                    raise BrokerError(
                        f"nats-server node {index} exited with code {proc.popen.returncode} during start:\n"
                        f"{proc.log_tail(30)}"
                    )
            waiting_for = self._not_ready()
            if not waiting_for:
                return
            time.sleep(0.05)
        tails = "\n".join(f"--- node {i} ({p.log_path}):\n{p.log_tail(10)}" for i, p in self.processes.items())
        raise BrokerError(f"NATS cluster not ready after {timeout_s:.0f}s, waiting for {waiting_for}\n{tails}")

    def _not_ready(self) -> str:
        """What the cluster is still waiting for, or '' once it is ready."""
        names = {node_name(i) for i in self.processes}
        for index in self.processes:
            status, body = _get(self._monitor(index), "/healthz")
            if status != 200:
                return f"node {index} /healthz: {body.get('error', status)}"
        leaders = set()
        for index in self.processes:
            meta = _get(self._monitor(index), "/jsz")[1].get("meta_cluster") or {}
            leaders.add(meta.get("leader", ""))
            if meta.get("cluster_size") != NODES:
                return f"node {index} to see a meta group of {NODES} (it sees {meta.get('cluster_size')})"
        leader = node_index(next(iter(leaders))) if len(leaders) == 1 else None
        if leader is None:
            return f"one meta leader (nodes name {sorted(leaders)})"
        replicas = (_get(self._monitor(leader), "/jsz")[1].get("meta_cluster") or {}).get("replicas") or []
        waiting_for = followers_waited_for(replicas, names - {node_name(leader)})
        if waiting_for:
            return f"meta leader {node_name(leader)} to see {waiting_for}"
        for index in self.processes:
            routes = _get(self._monitor(index), "/routez")[1].get("routes") or []
            peers = {r.get("remote_name") for r in routes}
            if not names - {node_name(index)} <= peers:
                return f"node {index} routes to {sorted(names - {node_name(index)})} (it has {sorted(peers)})"
        return ""

    def stream_leader(self, stream: str, timeout_s: float = 0.5, skip: int | None = None) -> int | None:
        """Node index leading `stream` (see `stream_leader`), asking only nodes whose process still runs."""
        monitors = {index: self._monitor(index) for index, proc in self.processes.items() if proc.alive()}
        return stream_leader(monitors, stream, timeout_s, skip)


def stream_leader(
    monitors: Mapping[int, str], stream: str, timeout_s: float = 0.5, skip: int | None = None
) -> int | None:
    """Node index leading `stream`, as the first node (by monitor URL) that answers `/jsz?streams=true` sees it;
    None while there is none (an election) or no node answers. `skip`: a node known to be frozen, not worth a
    timeout. Call it from the cluster's network namespace."""
    for index, monitor_url in monitors.items():
        if index == skip:
            continue
        status, body = _get(monitor_url, "/jsz?streams=true", timeout_s)
        if status != 200:
            continue
        for account in body.get("account_details") or []:
            for detail in account.get("stream_detail") or []:
                if detail.get("name") == stream:
                    return node_index((detail.get("cluster") or {}).get("leader", ""))
    return None


def meta_leader(monitors: Mapping[int, str], timeout_s: float = 0.5, skip: int | None = None) -> int | None:
    """Node index leading the JetStream meta group, as the first node that answers `/jsz` sees it; None during an
    election or when no node answers. Call it from the cluster's network namespace."""
    for index, monitor_url in monitors.items():
        if index == skip:
            continue
        status, body = _get(monitor_url, "/jsz", timeout_s)
        if status == 200:
            return node_index((body.get("meta_cluster") or {}).get("leader", ""))
    return None


def followers_waited_for(replicas: list[dict[str, Any]], followers: set[str]) -> str:
    """What the meta leader's view of its followers (`/jsz` `meta_cluster.replicas`) still lacks, or '': each one
    current in the Raft group and not offline. Offline is the leader's record of the server's own reports, apart
    from Raft; stream placement skips an offline peer, so an R3 stream made while one is still marked so fails
    with "no suitable peers for placement, peer offline" (a clean-clone run, the host loaded)."""
    current = {r.get("name") for r in replicas if r.get("current")}
    offline = {r.get("name") for r in replicas if r.get("offline")}
    if current != followers:
        return f"both followers current (current: {sorted(current)})"
    if offline & followers:
        return f"no follower offline (offline: {sorted(offline & followers)})"
    return ""


def stop_detached(state: Mapping[str, Any], grace_s: float = 10.0) -> list[int]:
    """Stop the nodes of a detached cluster (from `NatsCluster.state()`) by PID, all at once; each PID is checked
    to be a nats-server before it is signalled. Returns the PIDs that were running."""
    return stop_nodes(state, "nats-server", grace_s)


def _get(monitor_url: str, path: str, timeout_s: float = 1.0) -> tuple[int | None, dict[str, Any]]:
    """GET a monitoring endpoint: (HTTP status, JSON body); (None, {}) when the node does not answer."""
    try:
        with urllib.request.urlopen(f"{monitor_url}{path}", timeout=timeout_s) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:  # /healthz answers 503 with a JSON reason while not ready
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {}
    except (OSError, ValueError):
        return None, {}
