"""From history rows to ordered series: one per (series key, metric, basis, percentile incl. max).

Two views of the same points:
- **nightly**: ordered by run date then run id. A series key leaves the version out (DESIGN.md), so the
  nightly view follows a cell across `version: latest` upgrades. When one run holds several cells of the same
  series key (a version comparison inside one run), mixing them would interleave releases, so the nightly view
  is then split per cell id.
- **version**: ordered by release (`packaging.version.Version`), then run date and id; built only when the
  series spans at least two versions and release order differs from run order (otherwise it would repeat the
  nightly view and every alert would be reported twice).
A percentile the run's sample count could not support is null in the history; such points are left out of
the series, never read as numbers.

Capacity series (one per series key and objectives, from `history/capacity/`) follow the same views. Only a
capacity the broker set counts: a search ended by the harness's saturation or by a step that failed to run
measured the harness, so its row is left out (and counted), never compared with the broker's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from packaging.version import InvalidVersion, Version

from ..capacity.search import BROKER_LIMITS
from .history import NOISE_COLUMNS, SERIES_PERCENTILES, VALUE_COLUMNS
from .model import CAPACITY, Point, Series

# Search ends whose capacity is the broker's: its own limits, and "held up to --max-rate" (a lower bound of
# it; a later run holding less is still a loss).
COUNTED_LIMITS = frozenset({*BROKER_LIMITS, "max-rate"})
CAPACITY_METRIC = "capacity"


def release_key(version: str) -> tuple[int, Version | str]:
    """Sort key in release order (3.9.2 < 4.2.1 < 4.3.1 < 4.10.0); unparseable versions sort last, by text."""
    try:
        return (0, Version(version))
    except InvalidVersion:
        return (1, version)


def nightly_key(row: dict[str, Any]) -> tuple[str, str]:
    return (str(row["run_date"]), str(row["run_id"]))


def _noise(row: dict[str, Any], column: str) -> float | None:
    """The run's own run-to-run variation of this statistic (a fraction), when the cell was repeated."""
    value = row.get(column)
    return None if value is None else float(value) / 100.0


def points_of(rows: Iterable[dict[str, Any]], column: str, noise_column: str) -> tuple[Point, ...]:
    return tuple(
        Point(
            run_date=str(r["run_date"]),
            run_id=str(r["run_id"]),
            cell_id=str(r["cell_id"]),
            version=str(r["version"] or ""),
            label=str(r["label"] or ""),
            system=str(r["system"] or ""),
            value=float(r[column]),
            noise=_noise(r, noise_column),
        )
        for r in rows
        if r[column] is not None
    )


def _views(members: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The nightly view (split per cell when one run holds several) and, when it differs, the release view."""
    views = [("nightly", g) for g in _nightly_groups(members)]
    by_version = _version_order(members)
    return views if by_version is None else [*views, ("version", by_version)]


def _nightly_groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    per_run: dict[str, int] = defaultdict(int)
    for r in rows:
        per_run[r["run_id"]] += 1
    if max(per_run.values()) == 1:
        return [sorted(rows, key=nightly_key)]
    by_cell: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_cell[r["cell_id"]].append(r)
    return [sorted(by_cell[c], key=nightly_key) for c in sorted(by_cell)]


def _version_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    if len({r["version"] for r in rows}) < 2:
        return None
    ordered = sorted(rows, key=lambda r: (release_key(str(r["version"])), *nightly_key(r)))
    return None if ordered == sorted(rows, key=nightly_key) else ordered


def build_series(rows: Iterable[dict[str, Any]]) -> tuple[list[Series], int]:
    """All series of the history with at least one supported point, and how many had none (skipped)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(str(r["series_key"]), str(r["metric"]), str(r["basis"]))].append(r)
    out: list[Series] = []
    unsupported = 0
    for (series_key, metric, basis), members in sorted(groups.items()):
        for view, ordered in _views(members):
            for percentile in SERIES_PERCENTILES:
                points = points_of(ordered, VALUE_COLUMNS[percentile], NOISE_COLUMNS[percentile])
                if not points:
                    unsupported += 1
                    continue
                out.append(Series(series_key, metric, basis, percentile, view, points))
    return out, unsupported


def counted_capacity(row: dict[str, Any]) -> bool:
    """A capacity the broker set (see COUNTED_LIMITS), with a value."""
    return row.get("limit") in COUNTED_LIMITS and row.get("capacity_per_s") is not None


def build_capacity_series(rows: Iterable[dict[str, Any]]) -> list[Series]:
    """One series per (series key, objectives) of the counted capacity rows (`history.read_capacity_history`)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if counted_capacity(r):
            groups[(str(r["series_key"]), str(r["objectives"]))].append(r)
    return [
        Series(key, CAPACITY_METRIC, objectives, "", view, points_of(ordered, "capacity_per_s", ""), CAPACITY)
        for (key, objectives), members in sorted(groups.items())
        for view, ordered in _views(members)
    ]
