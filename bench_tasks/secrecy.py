"""What is secret, and how the harness keeps it out of what it records.

One rule (`is_secret`) names a setting secret by its key, for every system: Kafka's server.properties, the
nats-server config, a matrix's native settings passed through to either, client settings split before a state
file is written. `redacted` applies it to whatever a cell records, nested maps and lists included, so a system
never redacts on its own terms: passwords, secrets, tokens, credentials, JAAS configs (which embed passwords),
private keys and key material (`ssl.keystore.key`, an NKEY `seed`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "<redacted>"

_SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "jaas", "private")
_SECRET_PARTS = frozenset({"pass", "pwd", "seed"})


def is_secret(key: object) -> bool:
    """Whether a setting named `key` holds a secret. `key` as the last part of a name counts (`ssl.keystore.key`,
    `api_key`); elsewhere it names something else (`key.serializer`, a TLS `key_file` path)."""
    name = str(key).lower()
    if any(word in name for word in _SECRET_WORDS):
        return True
    parts = [p for p in re.split(r"[^a-z0-9]+", name) if p]
    return bool(parts) and (parts[-1].endswith("key") or any(p in _SECRET_PARTS for p in parts))


def redacted(settings: Any) -> Any:
    """`settings` as a record may hold them: the value of every secret key replaced by `REDACTED`, through nested
    maps and lists (nats-server's `authorization`, `accounts`, `cluster` blocks). The input is not changed."""
    if isinstance(settings, Mapping):
        return {k: REDACTED if is_secret(k) else redacted(v) for k, v in settings.items()}
    if isinstance(settings, list | tuple):
        return [redacted(v) for v in settings]
    return settings
