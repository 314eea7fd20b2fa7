"""The broker systems sixnines measures: the one place that lists them.

Each system is a package (`systems/<name>/`: settings, releases, brokers, driver) whose `System` object the
core reaches through `system()` / `system_of()`; adding a system is its package and one line below.
"""

from __future__ import annotations

from typing import Any

from ..errors import SixninesError
from ..releases import is_pattern
from .base import System
from .chronicle import CHRONICLE
from .kafka import KAFKA
from .nats import NATS
from .rabbitmq import RABBITMQ
from .redis import REDIS
from .stan import STAN
from .valkey import VALKEY

SYSTEMS: dict[str, System] = {s.name: s for s in (NATS, KAFKA, RABBITMQ, REDIS, STAN, VALKEY, CHRONICLE)}


class UnknownSystem(SixninesError):
    exit_code = 2


def system(name: str) -> System:
    """The system called `name`; UnknownSystem naming the known ones otherwise."""
    try:
        return SYSTEMS[name]
    except KeyError:
        raise UnknownSystem(f"unknown system {name!r}; known: {', '.join(sorted(SYSTEMS))}") from None


def system_of(spec: Any) -> System:
    """The system of a cell spec (a model, or its dump as a mapping)."""
    return system(spec["system"] if isinstance(spec, dict) else spec.system)


def resolve_version(name: str, version: str) -> str:
    """`latest` or a line → the newest release of it that can be assembled now; an exact version unchanged."""
    return resolve_release(name, version)[0]


def resolve_release(name: str, wanted: str) -> tuple[str, dict[str, Any] | None]:
    """The release a run measures for `wanted`, and how it was chosen when `wanted` was `latest` or a line (what
    the cell records: asked, chosen, the list it was chosen from, and whether the registry could be reached)."""
    if not is_pattern(wanted):
        return wanted, None
    listed = system(name).releases_for_run()
    version = listed.resolve(wanted)
    record: dict[str, Any] = {"requested": wanted, "resolved": version, "list_fetched_at": listed.fetched_at}
    if listed.offline is not None:
        record["offline"] = listed.offline
    return version, record


__all__ = ["SYSTEMS", "System", "UnknownSystem", "resolve_release", "resolve_version", "system", "system_of"]
