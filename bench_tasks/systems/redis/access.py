"""Reaching a Redis server the cell does not own: the Airflow connection as a URL and redis-py credentials, what the
server says it is (`INFO server`), and the cell's streams (deleted at teardown; pub/sub channels leave nothing).

Connection fields: host and port -> `redis://host:port/<db>` (`rediss` with conn type `rediss` or extra
`tls_ca_file`; port 6379); schema or extra `db` -> the database number (default 0); password alone -> `AUTH
password` (the default user); login and password -> `AUTH user password` (an ACL user); extra `tls_ca_file` -> TLS
trusting that CA. The URL carries no secret: it is the recorded address.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...brokers.connections import BrokerConnection, ClientAccess
from ...errors import BrokerError
from ...load.routes import route_keys
from .settings import RedisCell

DEFAULT_PORT = 6379
VERSION_TIMEOUT_S = 5.0
_SERVER_KEPT = ("redis_version", "redis_mode", "os", "arch_bits", "redis_build_id")


def client_access(conn: BrokerConnection, spec: RedisCell | None = None) -> ClientAccess:
    """The URL without secrets (the address) and the redis-py connection kwargs the driver adds at connect."""
    if not conn.host:
        raise BrokerError(f"connection {conn.conn_id!r}: no host for Redis")
    if "," in conn.host:
        raise BrokerError(f"connection {conn.conn_id!r}: one Redis host (Cluster and Sentinel are not supported)")
    ca = conn.extra.get("tls_ca_file")
    scheme = "rediss" if ca or conn.conn_type == "rediss" else "redis"
    db = str(conn.schema or conn.extra.get("db") or 0)
    if not db.isdigit():
        raise BrokerError(f"connection {conn.conn_id!r}: the database {db!r} is not a number")
    address = f"{scheme}://{conn.host}:{conn.port or DEFAULT_PORT}/{db}"
    client: dict[str, Any] = {}
    described: dict[str, Any] = {"connection": conn.conn_id, "address": address, "auth": "none"}
    if conn.password:
        client["password"] = conn.password
        described["auth"] = "password"
    if conn.login:
        client["username"] = conn.login
        described |= {"auth": "acl user/password", "user": conn.login}
    if ca:
        client["ssl_ca_certs"] = described["tls_ca_file"] = str(ca)
    return ClientAccess(address, client, described)


def ask_version(address: str, client: Mapping[str, Any], spec: RedisCell) -> dict[str, Any]:
    """What `INFO server` reports (its version, mode, OS), asked over a short-lived synchronous connection."""
    kept = server_info(address, client, _SERVER_KEPT)
    return {
        "version": kept.get("redis_version", "unknown"),
        "version_source": "the server's INFO server (redis_version)",
        "server_info": kept,
    }


def server_info(address: str, client: Mapping[str, Any], fields: Sequence[str]) -> dict[str, str]:
    """`fields` of the server's `INFO server`, as text, asked over a short-lived synchronous connection."""
    import redis

    server = redis.Redis.from_url(
        address, **client, socket_timeout=VERSION_TIMEOUT_S, socket_connect_timeout=VERSION_TIMEOUT_S, protocol=2
    )
    try:
        info = server.info("server")
    except redis.RedisError as exc:
        raise BrokerError(f"the server at {address} did not answer INFO server: {exc}") from None
    finally:
        server.close()
    return {key: str(info[key]) for key in fields if key in info}


def route_names(spec: RedisCell, names: str) -> list[str]:
    """Every stream the cell writes (its measured route, a chain's second hop, each background's); pub/sub
    channels exist only while subscribed, so they name nothing to delete."""
    from .driver import key_for

    if spec.broker.mode != "streams":
        return []
    return [key_for(names, route) for route in route_keys(spec)]


def delete_routes(address: str, client: Mapping[str, Any], spec: RedisCell, names: str) -> list[str]:
    import redis

    streams = route_names(spec, names)
    if not streams:
        return []
    server = redis.Redis.from_url(
        address, **client, socket_timeout=VERSION_TIMEOUT_S, socket_connect_timeout=VERSION_TIMEOUT_S, protocol=2
    )
    try:
        return [stream for stream in streams if server.delete(stream)]
    finally:
        server.close()
