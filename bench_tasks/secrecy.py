"""What is secret, and how the harness keeps it: out of what it records, and private where it must be written.

One rule (`is_secret`) names a setting secret by its key, for every system: Kafka's server.properties, the
nats-server config, a matrix's native settings passed through to either, client settings split before a state
file is written. `redacted` applies it to whatever a cell records, nested maps and lists included, so a system
never redacts on its own terms: passwords, secrets, tokens, credentials, JAAS configs (which embed passwords),
private keys and key material (`ssl.keystore.key`, an NKEY `seed`). A URL's `user:password@` is a secret
wherever it appears: `without_userinfo` removes it from any text that is recorded, logged or printed (and
`redacted` from every string it records).

A file that holds a secret (a server.properties with a JAAS line, a private key, the client settings a
detached generator reads back) is written by `write_secret` only: created owner-only before a byte is written,
in a folder only its owner can enter, replaced atomically. Nothing else in the harness chooses those modes.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

REDACTED = "<redacted>"

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@,]*)@")
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
    maps and lists (nats-server's `authorization`, `accounts`, `cluster` blocks), and every URL's userinfo
    removed (a route `nats://user:password@host`). The input is not changed."""
    if isinstance(settings, Mapping):
        return {k: REDACTED if is_secret(k) else redacted(v) for k, v in settings.items()}
    if isinstance(settings, list | tuple):
        return [redacted(v) for v in settings]
    return without_userinfo(settings) if isinstance(settings, str) else settings


def without_userinfo(text: str) -> str:
    """`text` with the `user:password@` (or `token@`) of every URL in it removed: one address, a comma-separated
    list of them, or a message that quotes one."""
    return _USERINFO.sub(r"\g<scheme>", text)


def userinfo(url: str) -> tuple[str, str | None] | None:
    """(user, password) of a URL that carries them, (token, None) for `scheme://token@host`; None without."""
    match = _USERINFO.search(url)
    if match is None or not match.group("userinfo"):
        return None
    user, colon, password = match.group("userinfo").partition(":")
    return unquote(user), unquote(password) if colon else None


def secret_parts(settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`settings` split by the rule into (what may be written anywhere, what only a secret file may hold)."""
    public = {k: v for k, v in settings.items() if not is_secret(k)}
    return public, {k: v for k, v in settings.items() if is_secret(k)}


def write_secret(path: Path, data: str | bytes, mode: int = 0o600) -> Path:
    """Write `data` to `path` readable by its owner only: the file is created with `mode` before anything is
    written into it and renamed into place, so no reader ever sees it with a looser mode or half written. With an
    owner-only mode the folder is made private too (0700), so the file cannot even be listed by others. A looser
    `mode` is for material other users' processes must read (the compose deployment's broker keys)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not mode & 0o077:
        path.parent.chmod(0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # created 0600
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
