"""Release order, and what a matrix may say of a release: an exact version, a line (`4.3.x`, `4.x`) or `latest`.

Releases are ordered as their registries number them (`packaging`'s version order: 4.10.0 after 4.9.2, a
pre-release before its release), so a history charts every percentile against that order. Pure functions; the
lists they work on come from a system's release catalogue (`catalog.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from packaging.version import InvalidVersion, Version

LATEST = "latest"
_LINE = re.compile(r"^(?P<prefix>\d+(?:\.\d+)*)\.x$")


def version_key(version: str) -> Version:
    """A release's place in release order; ValueError naming a version no registry numbering reads."""
    try:
        return Version(version)
    except InvalidVersion:
        raise ValueError(f"{version!r} is not a release version (like 4.3.2)") from None


def is_version(text: str) -> bool:
    try:
        version_key(text)
    except ValueError:
        return False
    return True


def newest_first(versions: Iterable[str]) -> list[str]:
    return sorted(set(versions), key=version_key, reverse=True)


def is_pattern(text: str) -> bool:
    """`latest`, or a line (`4.3.x`, `4.x`): resolved against the release list when a run starts."""
    return text == LATEST or _LINE.match(text) is not None


def matches(pattern: str, version: str) -> bool:
    """Whether `version` is of `pattern`'s line (`latest` matches every release)."""
    if pattern == LATEST:
        return True
    line = _LINE.match(pattern)
    if line is None:
        return pattern == version
    return _release_parts(version)[: len(line["prefix"].split("."))] == tuple(map(int, line["prefix"].split(".")))


def newest_matching(pattern: str, versions: Sequence[str]) -> str | None:
    """The newest of `versions` (any order) that `pattern` names, or None."""
    return next((v for v in newest_first(versions) if matches(pattern, v)), None)


def minor_of(version: str) -> tuple[int, int]:
    parts = (*_release_parts(version), 0)
    return parts[0], parts[1]


def _release_parts(version: str) -> tuple[int, ...]:
    return version_key(version).release


def stable(version: str) -> bool:
    """Not a pre-release or a development release: what `latest`, lines and ranges choose from."""
    parsed = version_key(version)
    return not (parsed.is_prerelease or parsed.is_devrelease)
