"""Reaching RabbitMQ nodes the cell does not own: the Airflow connection as AMQP URLs and credentials, what the
server says it is (its Connection.Start properties), and the cell's queues (deleted at teardown).

Connection fields: host (several comma-separated, or extra `hosts`) and port -> `amqp://host:port/<vhost>`
(`amqps` with extra `tls_ca_file` or conn type `amqps`; port 5672, or 5671 for TLS); schema or extra `vhost` -> the
virtual host (default `/`); login/password -> PLAIN credentials; extra `tls_ca_file` -> TLS trusting that CA.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ...brokers.connections import BrokerConnection, ClientAccess
from ...errors import BrokerError, RoutesNotDeleted
from ...load.loop import run_precise
from ...load.routes import route_keys
from .settings import RabbitmqCell

DEFAULT_PORT, DEFAULT_TLS_PORT = 5672, 5671
_SERVER_KEPT = ("product", "version", "platform", "cluster_name")


def client_access(conn: BrokerConnection, spec: RabbitmqCell | None = None) -> ClientAccess:
    """AMQP URLs without secrets (the address) and the credentials and CA the driver adds at connect."""
    extra = conn.extra
    hosts = extra.get("hosts") or conn.host or ""
    hosts = [h.strip() for h in (hosts.split(",") if isinstance(hosts, str) else hosts) if str(h).strip()]
    if not hosts:
        raise BrokerError(f"connection {conn.conn_id!r}: no host (and no extra.hosts) for RabbitMQ")
    ca = extra.get("tls_ca_file")
    scheme = "amqps" if ca or conn.conn_type == "amqps" else "amqp"
    port = conn.port or (DEFAULT_TLS_PORT if scheme == "amqps" else DEFAULT_PORT)
    vhost = conn.schema or extra.get("vhost") or "/"
    address = ",".join(f"{scheme}://{h if ':' in h else f'{h}:{port}'}/{quote(vhost, safe='')}" for h in hosts)
    client: dict[str, Any] = {}
    described: dict[str, Any] = {"connection": conn.conn_id, "address": address, "vhost": vhost, "auth": "none"}
    if conn.login:
        client |= {"username": conn.login, "password": conn.password or ""}
        described |= {"auth": "user/password", "user": conn.login}
    if ca:
        client["tls_ca_file"] = described["tls_ca_file"] = str(ca)
    return ClientAccess(address, client, described)


def ask_version(address: str, client: Mapping[str, Any], spec: RabbitmqCell) -> dict[str, Any]:
    return run_precise(_server_properties(address, client, spec))


async def _server_properties(address: str, client: Mapping[str, Any], spec: RabbitmqCell) -> dict[str, Any]:
    from .driver import RabbitmqDriver

    driver = RabbitmqDriver(address, spec, "info", client=client)
    try:
        conn, _channel = await driver.open_channel("sixnines-info")
        props = {k: _text(v) for k, v in (conn.server_properties or {}).items() if k in _SERVER_KEPT}
    finally:
        await driver.close()
    return {
        "version": props.get("version", "unknown"),
        "version_source": "the server's Connection.Start properties (pika server_properties)",
        "server_properties": props,
    }


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def route_names(spec: RabbitmqCell, names: str) -> list[str]:
    """Every queue the cell uses: the measured one, a chain's second hop, each background workload's."""
    from .driver import queue_for

    return [queue_for(names, route) for route in route_keys(spec)]


def delete_routes(address: str, client: Mapping[str, Any], spec: RabbitmqCell, names: str) -> list[str]:
    """Delete the cell's queues (and exchanges); returns the queues the node confirmed deleted. Raises
    RoutesNotDeleted when it refused one or did not answer, naming each such queue and why."""
    gone, failed = run_precise(_delete_queues(address, client, spec, names))
    if failed:
        raise RoutesNotDeleted(f"RabbitMQ at {address}", gone, failed)
    return gone


async def _delete_queues(
    address: str, client: Mapping[str, Any], spec: RabbitmqCell, names: str
) -> tuple[list[str], dict[str, str]]:
    """Each route's queue deleted on a connection of its own (a refusal closes the channel it came on): the
    queues deleted, and {queue: why} for the others."""
    from .driver import RabbitmqDriver

    gone: list[str] = []
    failed: dict[str, str] = {}
    for route in route_keys(spec):
        driver = RabbitmqDriver(address, spec, names, route, client)
        try:
            await driver.cleanup()
        except Exception as exc:
            failed[driver.queue] = str(exc) if isinstance(exc, BrokerError) else f"{type(exc).__name__}: {exc}"
        else:
            gone.append(driver.queue)
        finally:
            await driver.close()
    return gone, failed
