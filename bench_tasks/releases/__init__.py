"""Releases of the systems sixnines measures, from their registries: listed, cached, named by a matrix exactly, by
line or as `latest`, expanded from ranges, resolved when a run starts (`catalog.py`), in release order
(`order.py`). The core names no system: each system's package lists its own registry (`System.list_releases`)."""

from __future__ import annotations

from .catalog import Release, ReleaseList, cached, current, known, refresh, resolve
from .order import LATEST, is_pattern, is_version, newest_first, version_key


def release_problem(system: str, wanted: str) -> str | None:
    """Why a matrix cannot name `wanted` for `system`, read from the cached list only (no network: matrices are
    parsed by Airflow's DAG processor); without a cached list, only that it reads as a version or a line."""
    if not (is_pattern(wanted) or is_version(wanted)):
        return f"{wanted!r} is neither a release (4.3.2), a line (4.3.x) nor 'latest'"
    known = cached(system)
    return None if known is None else known.problem(wanted)


__all__ = [
    "LATEST",
    "Release",
    "ReleaseList",
    "cached",
    "current",
    "is_pattern",
    "is_version",
    "known",
    "newest_first",
    "refresh",
    "release_problem",
    "resolve",
    "version_key",
]
