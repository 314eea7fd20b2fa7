"""Starting a NATS cell's brokers: one nats-server, or a 3-node JetStream cluster whose faults hit the node that
leads the cell's measured stream (watched like a partition-0 leader, so received samples carry it). No leader (an
election) is not recorded: samples keep the last leader until a new one is known."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from ...brokers.leaders import LeaderPoll
from ...load.routes import final_route
from ...topology.netns import inside
from .auth import client_credentials
from .settings import NatsBroker, NatsCell

PROCESS_NAME = "nats-server"


class ServerNode:
    """A single nats-server as the broker-control protocol's nodes (node 0)."""

    def __init__(self, server: Any):
        self.server = server

    @property
    def node_pids(self) -> dict[int, int]:
        return {0: self.server.endpoint.pid}

    def pause(self, node: int) -> None:
        self.server.pause()

    def resume(self, node: int) -> None:
        self.server.resume()

    def kill(self, node: int) -> None:
        self.server.kill()

    def alive(self) -> dict[int, bool]:
        return {0: self.server.process is not None and self.server.process.alive()}

    def stop(self) -> list[int]:
        running = [pid for node, pid in self.node_pids.items() if self.alive()[node]]
        self.server.stop()
        return running


def start_brokers(
    spec: NatsCell,
    names: str,
    workdir: Path,
    tie_to_parent: bool,
    host: str,
    sites: Mapping[int, tuple[str, str]] | None = None,
) -> StartedBrokers:
    """`sites`: each node's (namespace, address) when each has a host of its own (a single server is node 0)."""
    if spec.broker.servers > 1:
        return _start_cluster(spec, names, workdir, tie_to_parent, host, sites)
    if sites:
        namespace, address = sites[0]
        with inside(namespace):
            return start_server(spec.version, spec.broker, workdir, tie_to_parent, address)
    return start_server(spec.version, spec.broker, workdir, tie_to_parent, host)


def start_server(version: str, broker: NatsBroker, workdir: Path, tie_to_parent: bool, host: str) -> StartedBrokers:
    from .server import NatsServer

    server = NatsServer(version, broker, workdir, tie_to_parent, host)
    e = server.start()
    return StartedBrokers(
        address=e.url,
        nodes=ServerNode(server),
        process_name=PROCESS_NAME,
        workdir=workdir,
        context={"version": e.version, "mode": e.mode, "config": e.config, "pid": e.pid, "monitor_url": e.monitor_url},
        logs=[workdir / "nats-server.log"],
        client=client_credentials(broker.server.get("authorization")),  # a matrix's own user: clients log in
    )


def _start_cluster(
    spec: NatsCell,
    names: str,
    workdir: Path,
    tie_to_parent: bool,
    host: str,
    sites: Mapping[int, tuple[str, str]] | None = None,
) -> StartedBrokers:
    """Three nodes; every node's version, pid and exact config, the cluster name and the stream are recorded."""
    started = start_cluster(spec.version, spec.broker, workdir, tie_to_parent, host, sites)
    stream = _measured_stream(spec, names)
    started.context |= {"replicas": spec.broker.replicas, "stream": stream}
    started.leader = {**(started.leader or {}), "stream": stream}
    return started


def start_cluster(
    version: str,
    broker: NatsBroker,
    workdir: Path,
    tie_to_parent: bool,
    host: str,
    sites: Mapping[int, tuple[str, str]] | None = None,
) -> StartedBrokers:
    from .cluster import NatsCluster

    cluster = NatsCluster(version, broker, workdir, tie_to_parent, host, sites)
    e = cluster.start()
    return StartedBrokers(
        address=e.url,
        nodes=cluster,
        process_name=PROCESS_NAME,
        workdir=workdir,
        context={**{k: v for k, v in asdict(e).items() if k != "workdir"}, "servers": len(e.nodes)},
        logs=sorted(workdir.rglob("*.log")),
        leader={"monitors": {str(n.index): n.monitor_url for n in e.nodes}},
        client=client_credentials(broker.server.get("authorization")),
    )


def _measured_stream(spec: NatsCell, names: str) -> str:
    from .driver import stream_for

    return stream_for(names, final_route(spec))  # a chain's second hop: what the measured consumers read


def leader_poll(
    address: str, client: Mapping[str, Any], ref: Mapping[str, Any], patient: bool, paused: Callable[[], int | None]
) -> LeaderPoll | None:
    """The measured stream's leader (as partition 0) from the nodes' monitor ports; a frozen node is skipped."""
    if not ref.get("monitors") or not ref.get("stream"):
        return None
    from .cluster import stream_leader

    monitors = {int(k): v for k, v in ref["monitors"].items()}
    timeout_s = 0.5 if patient else 0.2

    def poll() -> dict[int, int]:
        leader = stream_leader(monitors, ref["stream"], timeout_s, skip=paused())
        return {} if leader is None else {0: leader}

    return poll


def controller_poll(
    address: str, client: Mapping[str, Any], ref: Mapping[str, Any], paused: Callable[[], int | None]
) -> Callable[[], int | None] | None:
    """The JetStream meta leader (the node whose meta group places streams and consumers), from the nodes'
    monitor ports; a frozen node is skipped."""
    if not ref.get("monitors"):
        return None
    from .cluster import meta_leader

    monitors = {int(k): v for k, v in ref["monitors"].items()}
    return lambda: meta_leader(monitors, 0.5, skip=paused())


def retarget(ref: Mapping[str, Any] | None, spec: NatsCell, names: str) -> dict[str, Any] | None:
    """A reused cluster's leader reference made the next cell's (its stream); a single server has none."""
    if not ref or not ref.get("monitors"):
        return None
    return {**ref, "stream": _measured_stream(spec, names)}


def describe_running(state: Mapping[str, Any]) -> list[str]:
    """A cluster: which node leads the JetStream meta group; a single server: its connections and messages."""
    from .server import NatsServer

    monitors = (state.get("leader") or {}).get("monitors") or {}
    if monitors:
        meta: dict[str, Any] = {}
        for url in monitors.values():
            with contextlib.suppress(OSError):
                meta = NatsServer.jsz(url).get("meta_cluster") or {}
                break
        return [f"cluster {meta.get('name', '?')}  meta leader {meta.get('leader') or 'none'}"]
    url = state["context"].get("monitor_url")
    if not url:
        return []
    varz = NatsServer.varz(url)
    return [f"connections {varz.get('connections')}  in_msgs {varz.get('in_msgs')}  monitor {url}"]
