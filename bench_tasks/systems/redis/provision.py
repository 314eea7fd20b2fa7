"""Starting a Redis cell's servers: one redis-server, or a primary (node 1) with replicas, as the broker-control
protocol's `StartedBrokers`.

Redis replication elects nobody (no Sentinel, no Cluster): node 1 is the primary for every route while it lives,
so no leader is watched and a fault hits node 1, the first node, which is the primary (`NodeBrokers.fault_target`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...brokers.handles import StartedBrokers
from ...errors import BrokerError
from .settings import RedisCell

if TYPE_CHECKING:
    from .nodes import RedisServers

START_ATTEMPTS = 3
# What redis-server logs when a port chosen free was taken by another process before it bound it.
_PORT_TAKEN = ("Address already in use",)


def start_servers(
    spec: RedisCell, workdir: Path, tie_to_parent: bool, host: str, kind: type[RedisServers] | None = None
) -> Any:
    """Start the cell's servers (`kind`: Redis's, or another server of the family), on fresh free ports again (up to
    `START_ATTEMPTS`) when another process took a port between its choice and the server's bind (a shared host's
    race); any other failure is raised at once."""
    from .nodes import RedisServers

    for attempt in range(1, START_ATTEMPTS + 1):
        servers = (kind or RedisServers)(spec.version, spec.broker, workdir, tie_to_parent, host)
        try:
            servers.start()
            return servers
        except BrokerError as exc:
            if attempt == START_ATTEMPTS or not any(words in str(exc) for words in _PORT_TAKEN):
                raise
    raise AssertionError("unreachable")


def start_brokers(
    spec: RedisCell, names: str, workdir: Path, tie_to_parent: bool, host: str, kind: type[RedisServers] | None = None
) -> StartedBrokers:
    from .driver import route_name

    servers = start_servers(spec, workdir, tie_to_parent, host, kind)
    return StartedBrokers(
        address=servers.endpoint.url,
        nodes=servers,
        process_name=servers.PROCESS_NAME,
        workdir=workdir,
        context=servers.context() | {"route": route_name(spec, names)},
        logs=servers.logs(),
        client={"password": servers.password},  # the harness's clients AUTH with the cell's password
    )


def describe_running(state: Mapping[str, Any], kind: str = "Redis") -> list[str]:
    context = state.get("context") or {}
    nodes = context.get("nodes") or []
    ports = ", ".join(str(node.get("port")) for node in nodes)
    shape = f"primary + {context.get('replicas')} replicas" if context.get("replicas") else "one server"
    return [f"{kind} {context.get('version', '?')} {context.get('mode', '?')}, {shape}, port {ports}"]
