"""Who may connect to a provisioned nats-server (or NATS Streaming's embedded one), and how the harness's own
clients log in: the config's top-level `authorization` block.

A matrix may set its own block (`broker.server.authorization`: one `user` and `password`, or a `token`); the
harness's clients then log in with it. Where a system's servers always ask for a password (NATS Streaming), a
cell without one gets a single user of its own, `sixnines`, with a random password per start. Either way the
credentials reach the clients through the brokers' client settings (secret), never through a record.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

from ...errors import BrokerError

DEFAULT_USER = "sixnines"


def cell_authorization(server: Mapping[str, Any]) -> dict[str, Any]:
    """The matrix's `authorization` block, else one user of the cell's own with a random password."""
    given = server.get("authorization")
    if given is not None:
        return dict(given)
    return {"user": DEFAULT_USER, "password": secrets.token_urlsafe(24)}


def client_credentials(authorization: Mapping[str, Any] | None, required: bool = False) -> dict[str, Any]:
    """`nats.connect()` credentials for a server with this `authorization` block (none without one). A block with
    no single user or token (a `users` list, nkeys, an auth callout) gives none — the matrix's `client.connect`
    may carry its own — or, `required` (the server itself logs in with it), is refused, naming the field."""
    if not authorization:
        return {}
    if authorization.get("token") is not None:
        return {"token": str(authorization["token"])}
    if authorization.get("user") is not None and authorization.get("password") is not None:
        return {"user": str(authorization["user"]), "password": str(authorization["password"])}
    if not required:
        return {}
    raise BrokerError(
        "broker.server.authorization: give one `user` and `password`, or a `token`: the harness's clients log in "
        "with them (a `users` list, nkeys or an auth callout leave it no credential to use)"
    )
