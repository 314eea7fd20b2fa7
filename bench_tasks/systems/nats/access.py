"""Reaching NATS servers the cell does not own: the Airflow connection as nats-py arguments, what the server says
it is (its INFO on connect), and the cell's JetStream streams (deleted at teardown; core subjects need nothing).

Connection fields: host/port (or extra `servers`) -> `nats://host:port`; login/password -> user/password, extra
`token`; extra `tls_ca_file` -> TLS with that CA. Credentials written into a server URL (`nats://user:pw@host`,
`nats://token@host`) are taken out of it into the client settings when the connection has none of its own: the
address, which is recorded, logged and printed, never carries them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from ...brokers.connections import BrokerConnection, ClientAccess
from ...errors import BrokerError
from ...load.loop import run_precise
from ...secrecy import userinfo, without_userinfo
from .settings import NatsCell

DEFAULT_NATS_PORT = 4222
_INFO_KEPT = (
    "server_id",
    "server_name",
    "version",
    "go",
    "proto",
    "jetstream",
    "cluster",
    "max_payload",
    "tls_required",
)


def client_access(conn: BrokerConnection, spec: NatsCell) -> ClientAccess:
    return nats_access(conn)


def nats_access(conn: BrokerConnection) -> ClientAccess:
    """`nats.connect()` keyword arguments for `conn` (JSON-able; `tls_ca_file` becomes an SSL context at connect)."""
    extra = conn.extra
    servers = extra.get("servers")
    ca = extra.get("tls_ca_file")
    if servers:
        address = servers if isinstance(servers, str) else ",".join(str(s) for s in servers)
    elif conn.host:
        scheme = "tls" if ca else "nats"
        address = conn.host if "://" in conn.host else f"{scheme}://{conn.host}:{conn.port or DEFAULT_NATS_PORT}"
    else:
        raise BrokerError(f"connection {conn.conn_id!r}: no host (and no extra.servers) for NATS")
    login, password, token = _credentials(conn, address)
    address = without_userinfo(address)
    client: dict[str, Any] = {}
    described: dict[str, Any] = {"connection": conn.conn_id, "servers": address, "auth": "none"}
    if login:
        client |= {"user": login, "password": password or ""}
        described |= {"auth": "user/password", "user": login}
    elif token:
        client["token"] = token
        described["auth"] = "token"
    if ca:
        client["tls_ca_file"] = str(ca)
        described["tls_ca_file"] = str(ca)
    return ClientAccess(address, client, described)


def _credentials(conn: BrokerConnection, address: str) -> tuple[str | None, str | None, str | None]:
    """(login, password, token): the connection's own fields, else what its server URLs carry (all the same)."""
    token = str(conn.extra.get("token") or conn.password or "") or None
    if conn.login or token:
        return conn.login, conn.password, None if conn.login else token
    found = {userinfo(url) for url in address.split(",")} - {None}
    if len(found) > 1:
        raise BrokerError(
            f"connection {conn.conn_id!r}: its server URLs carry different credentials; put one user in the "
            "connection's login and password instead"
        )
    if not found:
        return None, None, None
    user, secret = found.pop()  # type: ignore[misc]
    return (user, secret, None) if secret is not None else (None, None, user)


def ask_version(address: str, client: Mapping[str, Any], spec: NatsCell) -> dict[str, Any]:
    return run_precise(_server_info(address, client, spec))


async def _server_info(address: str, client: Mapping[str, Any], spec: NatsCell) -> dict[str, Any]:
    from .client import connect

    nc = await connect(address, spec, "sixnines-info", client)
    try:
        v = nc.connected_server_version
        info = dict(nc._server_info)  # the INFO the server sent on connect (nats-py keeps it as is)
    finally:
        await nc.close()
    return {
        "version": f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else ""),
        "version_source": "the server's INFO on connect (nats-py connected_server_version)",
        "server_info": {k: info[k] for k in _INFO_KEPT if k in info},
    }


def route_names(spec: NatsCell, names: str) -> list[str]:
    """Every stream the cell uses (JetStream only: core subjects need no creating)."""
    from ...load.routes import route_keys
    from .driver import stream_for

    return [stream_for(names, route) for route in route_keys(spec)] if spec.broker.mode == "jetstream" else []


def delete_routes(address: str, client: Mapping[str, Any], spec: NatsCell, names: str) -> list[str]:
    return run_precise(_delete_streams(address, client, spec, route_names(spec, names)))


async def _delete_streams(address: str, client: Mapping[str, Any], spec: NatsCell, streams: list[str]) -> list[str]:
    if not streams:
        return []
    import nats.js.errors

    from .client import connect

    nc = await connect(address, spec, "sixnines-teardown", client)
    gone = []
    try:
        js = nc.jetstream()
        for name in streams:
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(name)
                gone.append(name)
    finally:
        await nc.close()
    return gone
