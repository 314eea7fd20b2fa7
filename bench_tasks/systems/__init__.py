"""The broker systems sixnines measures: the one place that lists them.

Each system is a package (`systems/<name>/`: settings, releases, brokers, driver) whose `System` object the
core reaches through `system()` / `system_of()`; adding a system is its package and one line below.
"""

from __future__ import annotations

from typing import Any

from ..errors import SixninesError
from .base import System
from .kafka import KAFKA
from .nats import NATS
from .rabbitmq import RABBITMQ
from .redis import REDIS
from .stan import STAN

SYSTEMS: dict[str, System] = {s.name: s for s in (NATS, KAFKA, RABBITMQ, REDIS, STAN)}


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
    """`latest` → the system's newest known release; a concrete version is returned unchanged."""
    return system(name).resolve_version(version)


__all__ = ["SYSTEMS", "System", "UnknownSystem", "resolve_version", "system", "system_of"]
