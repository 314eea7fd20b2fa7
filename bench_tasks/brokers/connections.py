"""Airflow connections for external brokers: found by id, turned into client settings, never recorded.

A matrix names a connection id (`connection:`), never an address or a secret, so the cell spec and the lake stay
free of credentials. The connection is resolved when a step runs, not when a matrix is parsed:

- from `AIRFLOW_CONN_<ID>` (Airflow's URI or JSON form) when the variable is set: how a child process (the
  detached generator) receives it, and how runs outside Airflow (`sixnines run`, tests) are configured;
- otherwise through Airflow (`airflow.sdk.BaseHook.get_connection`, the Airflow 3 task SDK), which also consults
  the secrets backends.

What each system reads of a connection (host, port, login, extras) is its own (`systems/<name>/access.py`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from ..errors import BrokerError


@dataclass(frozen=True)
class BrokerConnection:
    """The fields of an Airflow connection the harness reads. `password` never appears in a repr."""

    conn_id: str
    conn_type: str = ""
    host: str = ""
    port: int | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    schema: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Airflow's JSON form of this connection: what `AIRFLOW_CONN_<ID>` may hold (handed to child processes
        through their environment, never through a file)."""
        return json.dumps(
            {
                "conn_type": self.conn_type,
                "host": self.host,
                "port": self.port,
                "login": self.login,
                "password": self.password,
                "schema": self.schema,
                "extra": self.extra,
            }
        )


def env_var(conn_id: str) -> str:
    """The environment variable Airflow reads a connection from."""
    return f"AIRFLOW_CONN_{conn_id.upper()}"


def get_connection(conn_id: str) -> BrokerConnection:
    """The connection `conn_id`, from `AIRFLOW_CONN_<ID>` or else from Airflow; BrokerError if neither has it."""
    raw = os.environ.get(env_var(conn_id))
    if raw:
        return parse_connection(conn_id, raw)
    return _from_airflow(conn_id)


def parse_connection(conn_id: str, raw: str) -> BrokerConnection:
    """Airflow's JSON form (`{"conn_type": …, "host": …, "extra": {…}}`) or URI form
    (`kafka://login:password@host:port/schema?extra_key=value`, or `?__extra__=<json>`)."""
    text = raw.strip()
    try:
        if text.startswith("{"):
            data = json.loads(text)
            extra = data.get("extra") or {}
            return BrokerConnection(
                conn_id=conn_id,
                conn_type=data.get("conn_type") or "",
                host=data.get("host") or "",
                port=int(data["port"]) if data.get("port") not in (None, "") else None,
                login=data.get("login"),
                password=data.get("password"),
                schema=data.get("schema") or "",
                extra=json.loads(extra) if isinstance(extra, str) else dict(extra),
            )
        return _parse_uri(conn_id, text)
    except (ValueError, TypeError, AttributeError) as exc:
        raise BrokerError(
            f"connection {conn_id!r} ({env_var(conn_id)}): not a valid Airflow URI or JSON: {exc}"
        ) from None


def _parse_uri(conn_id: str, uri: str) -> BrokerConnection:
    """The URI form as Airflow reads it (`Connection.from_uri`): scheme is the type, query parameters the extras."""
    parts = urlsplit(uri)
    if not parts.scheme:
        raise ValueError("no connection type (scheme) in the URI")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    extra = json.loads(query["__extra__"]) if "__extra__" in query else query
    return BrokerConnection(
        conn_id=conn_id,
        conn_type=parts.scheme.replace("-", "_"),
        host=unquote(parts.hostname or ""),
        port=parts.port,
        login=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        schema=unquote(parts.path.lstrip("/")),
        extra=extra,
    )


def _from_airflow(conn_id: str) -> BrokerConnection:
    try:
        from airflow.sdk import BaseHook
    except ImportError:
        raise BrokerError(
            f"connection {conn_id!r}: {env_var(conn_id)} is not set and Airflow is not installed"
        ) from None
    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise BrokerError(
            f"connection {conn_id!r} not found: define it in Airflow or set {env_var(conn_id)} ({exc})"
        ) from None
    return BrokerConnection(
        conn_id=conn_id,
        conn_type=conn.conn_type or "",
        host=conn.host or "",
        port=conn.port,
        login=conn.login,
        password=conn.password,
        schema=conn.schema or "",
        extra=dict(conn.extra_dejson),
    )


# -- what clients need ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientAccess:
    """How a client reaches brokers: `address` (Kafka bootstrap servers or NATS URLs, comma-separated), `client`
    settings merged into every client's config (may hold secrets: passed to processes, never recorded), and
    `described` — the same without secrets, which is what the cell's context records."""

    address: str
    client: dict[str, Any]
    described: dict[str, Any]
