"""What is secret, and how the harness keeps it: out of everything it records, and private where it must be written.

Two rules, applied in one place each, so no system redacts on its own terms:

- **By key** (`is_secret`, `redacted`): a setting whose name says it holds a secret — passwords, secrets,
  tokens, credentials, JAAS configs (which embed passwords), private keys and key material (`ssl.keystore.key`,
  an NKEY `seed`), Redis's `requirepass`/`masterauth`, RabbitMQ's `default_pass`, an Erlang cookie — has its
  value replaced wherever a settings map is recorded: a cell's spec, a broker's rendered config, an OMB driver
  file's properties. A URL's `user:password@` is a secret wherever it appears (`without_userinfo`).
- **By value** (`remember`, `scrubbed`, `scrub_text`): every secret value this process has seen — a matrix's
  (each `Cell` remembers its spec's secrets when it is made), a broker's per-cell credential, an external
  connection's password — is searched for in every record before it is written (the lake's and the work
  folders' JSON and text: `lake.storage.write_text`, `lake.layout.write_json`), in every error text that names
  a cell, and in notifications. An error message that quotes a config line, a log tail or a client library's
  complaint cannot carry a secret into a record. The values are held in this process only, the way Airflow's
  own secrets masker holds what it masks; values shorter than `MIN_SCRUBBED` characters are too likely to
  occur by chance in ordinary text and are redacted by key only.

A file that holds a secret (a server config with a password, a private key, the client settings a detached
generator reads back, a cell's secret settings) is written by `write_secret` only: created owner-only before a
byte is written, in a folder only its owner can enter, replaced atomically. Nothing else in the harness chooses
those modes.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from pydantic import BaseModel

from .errors import SecretsError
from .paths import cache_dir

REDACTED = "<redacted>"
# Where a key to seal secrets for other hosts comes from: sixnines' own, else Airflow's Fernet key.
SEAL_KEY_ENVS = ("SIXNINES_SECRETS_KEY", "AIRFLOW__CORE__FERNET_KEY")
MIN_SCRUBBED = 4

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/@,]*)@")
_SECRET_WORDS = ("password", "passwd", "secret", "token", "credential", "jaas", "private", "cookie")
_SECRET_PARTS = frozenset({"pass", "pwd", "seed", "auth"})
# Parts of a name that hold a secret by their ending: Redis's `requirepass` and `masterauth`, a `*key` (the last
# part only: elsewhere `key` names something else, `key.serializer`, a TLS `key_file` path).
_SECRET_ENDINGS = ("pass", "auth")
_known: set[str] = set()
_listeners: list[Callable[[str], None]] = []


def is_secret(key: object) -> bool:
    """Whether a setting named `key` holds a secret, for every system's settings (see the module docstring).
    `auth` counts as a whole part (`auth`, `masterauth`) but not as the last word of a mode (`ssl.client.auth`
    names who must present a certificate)."""
    name = str(key).lower()
    if any(word in name for word in _SECRET_WORDS):
        return True
    parts = [p for p in re.split(r"[^a-z0-9]+", name) if p]
    if not parts:
        return False
    if len(parts) > 1 and parts[-1] == "auth":
        return False
    last = parts[-1]
    return last.endswith("key") or any(p in _SECRET_PARTS or p.endswith(_SECRET_ENDINGS) for p in parts)


def redacted(settings: Any) -> Any:
    """`settings` as a record may hold them: the value of every secret key replaced by `REDACTED`, through nested
    maps and lists (nats-server's `authorization`, `accounts`, `cluster` blocks), every URL's userinfo removed
    (a route `nats://user:password@host`) and every remembered secret value replaced in every string. The input
    is not changed."""
    return scrubbed(by_key(settings))


def by_key(settings: Any) -> Any:
    """The key rule and URL userinfo alone (`redacted` without the remembered values): what depends on the
    settings only, whatever this process has seen (a cell's id is hashed from it)."""
    if isinstance(settings, Mapping):
        return {k: REDACTED if is_secret(k) else by_key(v) for k, v in settings.items()}
    if isinstance(settings, list | tuple):
        return [by_key(v) for v in settings]
    return without_userinfo(settings) if isinstance(settings, str) else settings


def scrubbed(record: Any) -> Any:
    """`record` (any JSON-able structure the harness writes: a result, a state, a notification) with every
    remembered secret value and every URL's userinfo removed from its strings. Keys are not judged: a record's
    own fields (`series_key`, `cluster_key`) are not settings."""
    if isinstance(record, Mapping):
        return {k: scrubbed(v) for k, v in record.items()}
    if isinstance(record, list | tuple):
        return [scrubbed(v) for v in record]
    return scrub_text(record) if isinstance(record, str) else record


def scrub_text(text: str) -> str:
    """`text` without any remembered secret value — as written, JSON-escaped or HTML-escaped, so a JSON file or
    a report page that quotes one is covered too — and without any URL's userinfo."""
    for value in sorted(_known, key=len, reverse=True):  # a longer secret that contains a shorter one goes first
        for form in _forms(value):
            if form in text:
                text = text.replace(form, REDACTED)
    return without_userinfo(text)


def _forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], html.escape(value), html.escape(value, quote=False)}


def remember(values: Iterable[Any]) -> None:
    """Add secret values to the ones every record of this process is scrubbed of (`scrubbed`, `scrub_text`), and
    hand each new one to the listeners (`on_remember`)."""
    new = {v for v in (str(value) for value in values if value is not None) if len(v) >= MIN_SCRUBBED} - _known
    _known.update(new)
    for value in sorted(new):
        for listener in _listeners:
            listener(value)


def on_remember(listener: Callable[[str], None]) -> None:
    """Call `listener` with every secret value this process knows and will learn: a host's own masker (Airflow's
    `mask_secret`, so a task log or traceback it prints shows none either)."""
    if listener not in _listeners:
        _listeners.append(listener)
        for value in sorted(_known):
            listener(value)


def scrub_exception(exc: BaseException) -> BaseException:
    """`exc` (and the exceptions it was raised from) with every remembered secret removed from its message, in
    place, so it can be raised on with its type and traceback: a broker's start error quotes its log, and what
    runs a task (Airflow, the CLI) prints what it raised."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.args = tuple(scrub_text(a) if isinstance(a, str) else a for a in current.args)
        if isinstance(current, OSError) and isinstance(current.strerror, str):
            current.strerror = scrub_text(current.strerror)
        current = current.__cause__ or current.__context__
    return exc


def remember_settings(settings: Any) -> None:
    """Remember every secret value that `settings` holds (`secret_values`)."""
    remember(secret_values(settings))


def remember_model(model: BaseModel) -> None:
    """Remember every secret value a settings model holds in its pass-through maps (`split_secrets`)."""
    _public, held = split_secrets(model)
    remember(leaf for value in held.values() for leaf in _leaves(value))


def secret_values(settings: Any) -> set[str]:
    """Every value held under a secret key of `settings` (nested maps and lists; a secret block's leaves all
    count), and every password or token a URL in it carries."""
    found: set[str] = set()
    if isinstance(settings, Mapping):
        for key, value in settings.items():
            found |= _leaves(value) if is_secret(key) else secret_values(value)
    elif isinstance(settings, list | tuple):
        for value in settings:
            found |= secret_values(value)
    elif isinstance(settings, str):
        found |= {part for match in _USERINFO.finditer(settings) for part in _userinfo_parts(match)}
    return found


def _leaves(value: Any) -> set[str]:
    if isinstance(value, Mapping):
        return {leaf for v in value.values() for leaf in _leaves(v)}
    if isinstance(value, list | tuple):
        return {leaf for v in value for leaf in _leaves(v)}
    return set() if value is None or isinstance(value, bool) else {str(value)}


def _userinfo_parts(match: re.Match[str]) -> set[str]:
    """The secret part of a URL's userinfo: the password, or a token standing alone (`nats://token@host`)."""
    user, colon, password = match.group("userinfo").partition(":")
    secret = password if colon else user
    return {unquote(secret)} if secret else set()


def without_userinfo(text: str) -> str:
    """`text` with the `user:password@` (or `token@`) of every URL in it removed: one address, a comma-separated
    list of them, or a message that quotes one."""
    return _USERINFO.sub(r"\g<scheme>", text)


def login_url(url: str, user: str | None, password: str | None) -> str:
    """Each URL of `url` (comma-separated) carrying `user:password@` (`:password@` without a user), for a client
    outside the harness that only takes URLs (a benchmark's own, a native tool); never recorded."""
    info = f"{quote(user or '', safe='')}:{quote(password or '', safe='')}@"
    return ",".join(re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)", rf"\g<1>{info}", part) for part in url.split(","))


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


def recorded_model(model: BaseModel, scrub: bool = True) -> dict[str, Any]:
    """A settings model's JSON dump as a record may hold it: the key rule applied inside its pass-through maps
    (`server:`, `connect:`, `producer:` …, where any native option may sit), never to the fields the model itself
    declares (`workload.seed` is a schedule's seed, not a key's), and, with `scrub`, remembered secret values
    removed from every string (without: what the settings alone decide, for hashing)."""
    recorded = _recorded(model, model.model_dump(mode="json"))
    return scrubbed(recorded) if scrub else recorded


def _recorded(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel):
        return {name: _recorded(getattr(value, name), item) for name, item in dumped.items()}
    if isinstance(value, Mapping):
        if any(isinstance(v, BaseModel) for v in value.values()):
            return {k: _recorded(value[k], dumped[k]) for k in dumped}
        return by_key(dumped)
    if isinstance(value, list | tuple) and any(isinstance(v, BaseModel) for v in value):
        return [_recorded(v, d) for v, d in zip(value, dumped, strict=True)]
    return dumped


def split_secrets(model: BaseModel) -> tuple[dict[str, Any], dict[str, Any]]:
    """A model's dump split into what may be written anywhere (`recorded_model`) and the secret values it held,
    by their place (a JSON pointer, `/broker/server/requirepass`), for `merge_secrets` to put back."""
    full = model.model_dump(mode="json")
    public = recorded_model(model)
    held: dict[str, Any] = {}
    _differences(full, public, "", held)
    return public, held


def _differences(full: Any, public: Any, where: str, held: dict[str, Any]) -> None:
    if isinstance(full, dict) and isinstance(public, dict):
        for key, value in full.items():
            _differences(value, public.get(key), f"{where}/{_escape(str(key))}", held)
    elif isinstance(full, list) and isinstance(public, list) and len(full) == len(public):
        for index, (value, kept) in enumerate(zip(full, public, strict=True)):
            _differences(value, kept, f"{where}/{index}", held)
    elif full != public:
        held[where] = full


def merge_secrets(public: Any, held: Mapping[str, Any]) -> Any:
    """`public` (from `split_secrets`) with the secret values put back where they were."""
    merged = json.loads(json.dumps(public))
    for pointer, value in held.items():
        *path, last = [_unescape(part) for part in pointer.split("/")[1:]]
        target = merged
        for part in path:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return merged


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


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


def fingerprint(held: Mapping[str, Any]) -> str:
    """A stable identity of secret values that reveals nothing of them: an HMAC under a key kept private in the
    cache (made once per cache), so two states can tell whether they hold the same secrets (a reused cluster's
    password) while a copy of either cannot be tested against guessed passwords."""
    key_file = cache_dir() / "secrets" / "fingerprint.key"
    if not key_file.exists():
        write_secret(key_file, secrets.token_bytes(32))
    text = json.dumps(held, sort_keys=True, separators=(",", ":"))
    return hmac.new(key_file.read_bytes(), text.encode(), hashlib.sha256).hexdigest()[:16]


def seal(held: Mapping[str, Any]) -> str | None:
    """Secret settings sealed for another host of the same deployment (None when there are none): Fernet
    (`cryptography`) under `SIXNINES_SECRETS_KEY`, or Airflow's own Fernet key, which every worker of one
    deployment shares. A process with neither makes a key for itself and the processes it starts (the CLI's
    hosts on one machine), in its environment only."""
    if not any(held.values()):
        return None
    from cryptography.fernet import Fernet

    return Fernet(_seal_key()).encrypt(json.dumps(held).encode()).decode()


def unseal(token: str | None) -> dict[str, Any]:
    """What `seal` sealed; SecretsError naming the key to set when this host's key is not the sealer's."""
    if not token:
        return {}
    from cryptography.fernet import Fernet, InvalidToken

    key = next((os.environ[name] for name in SEAL_KEY_ENVS if os.environ.get(name)), None)
    if key is None:
        raise SecretsError(f"the cell's secret settings are sealed, and this host has no key: set {SEAL_KEY_ENVS[0]}")
    try:
        return json.loads(Fernet(key).decrypt(token.encode()))
    except (InvalidToken, ValueError):
        raise SecretsError(
            f"the cell's secret settings were sealed under another key: give every host the same "
            f"{SEAL_KEY_ENVS[0]} (or Airflow's core.fernet_key)"
        ) from None


def _seal_key() -> str:
    for name in SEAL_KEY_ENVS:
        if os.environ.get(name):
            return os.environ[name]
    from cryptography.fernet import Fernet

    os.environ[SEAL_KEY_ENVS[0]] = Fernet.generate_key().decode()
    return os.environ[SEAL_KEY_ENVS[0]]


def private_dir(path: Path) -> Path:
    """A folder only its owner can enter, made so from the start (crash dumps, secret material)."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.chmod(0o700)  # mkdir's mode is masked by the umask, and an existing folder keeps its own
    return path
