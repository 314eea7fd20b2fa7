"""Starting a NATS Streaming cell's broker: one server (the project never shipped more than fault-tolerant pairs and
a Raft mode, which seed 000 does not use), node 0 of the broker-control protocol. Nothing leads anything, so
faults always hit that one node; a restart brings it back on the same ports and store."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from .server import LOG_NAME, StanServer, max_payload_for, monitor
from .settings import StanBroker, StanCell

PROCESS_NAME = "nats-streaming-server"
NODE = 0


class ServerNode:
    """The single server as the protocol's nodes (node 0), restartable on its own store."""

    def __init__(self, server: StanServer):
        self.server = server

    @property
    def node_pids(self) -> dict[int, int]:
        assert self.server.process is not None
        return {NODE: self.server.process.pid}

    def pause(self, node: int) -> None:
        self.server.pause()

    def resume(self, node: int) -> None:
        self.server.resume()

    def kill(self, node: int) -> None:
        self.server.kill()

    def restart(self, node: int) -> None:
        """Start the node again on the same ports and store; its new pid replaces the old one."""
        self.server.restart()

    def alive(self) -> dict[int, bool]:
        return {NODE: self.server.alive()}

    def stop(self) -> list[int]:
        running = [pid for node, pid in self.node_pids.items() if self.alive()[node]]
        self.server.stop()
        return running


def cluster_id_for(broker: StanBroker, names: str) -> str:
    """The matrix's cluster id, or one of the cell's own (the server allows letters, digits, '-' and '_')."""
    return broker.cluster_id or "sixnines-" + re.sub(r"[^A-Za-z0-9_-]", "-", names)


def largest_message(spec: StanCell) -> int:
    sizes = [spec.workload.message_size_bytes, *(bg.message_size_bytes for bg in spec.background.values())]
    return max(sizes)


def start_brokers(spec: StanCell, names: str, workdir: Path, tie_to_parent: bool, host: str) -> StartedBrokers:
    cluster_id = cluster_id_for(spec.broker, names)
    max_payload = max_payload_for(largest_message(spec))
    return start_server(spec.version, spec.broker, workdir, cluster_id, tie_to_parent, host, max_payload)


def start_server(
    version: str,
    broker: StanBroker,
    workdir: Path,
    cluster_id: str,
    tie_to_parent: bool = True,
    host: str = "127.0.0.1",
    max_payload: int | None = None,
) -> StartedBrokers:
    """One server, ready for clients. The client settings carry the cluster id every connection needs."""
    server = StanServer(version, broker, workdir, cluster_id, tie_to_parent, host, max_payload)
    e = server.start()
    return StartedBrokers(
        address=e.url,
        nodes=ServerNode(server),
        process_name=PROCESS_NAME,
        workdir=workdir,
        context=asdict(e),
        logs=[workdir / LOG_NAME],
        client={"cluster_id": e.cluster_id, **server.client},  # the cell's user: every client logs in
    )


def describe_running(state: Mapping[str, Any]) -> list[str]:
    """The server's clients, channels and stored messages, from its monitoring port."""
    context = state.get("context") or {}
    url = context.get("monitor_url")
    if not url:
        return []
    s = monitor(url, "serverz")
    return [
        f"cluster {s.get('cluster_id')}  store {context.get('store')}  file_sync {context.get('file_sync')}",
        f"clients {s.get('clients')}  channels {s.get('channels')}  msgs {s.get('total_msgs')}  monitor {url}",
    ]
