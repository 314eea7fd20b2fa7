"""A cell across releases: every percentile in release order, the run-to-run band of each release's repeats, and
the first release whose tail moved beyond the noise.

The points come from the published history (one row per run × cell × metric × basis), so a release measured in
an earlier run counts as much as one measured tonight: a backfill adds only the releases that are missing. Where a
release was measured more than once, its newest run stands for it. The band is the repeats' min–max of that run
(the published `repeats.csv`), absent for a cell run once.

The finder is the regression detector's change-point rule with release order in place of time: with at least
`Settings.min_points` releases, Otava's change points of the release-ordered series; with fewer, each release
against the one before it (`baseline_change` over one release). A move counts when it exceeds the bar the
detector alerts on, `max(magnitude, the repeats' own variation)`, and leaves the previous release's band.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .detect import bar, baseline_change, otava_change_points
from .history import NOISE_COLUMNS, SERIES_PERCENTILES, VALUE_COLUMNS
from .model import ChangePoint, Series, Settings
from .series import points_of, release_key

TAIL = ("99", "99.9", "99.99", "99.999", "99.9999", "max")  # what "the tail moved" means
Band = tuple[float, float]  # min, max across a release's repeats, in ns


@dataclass(frozen=True)
class ReleaseHistory:
    """One cell (series key) × metric × basis across releases: the rows standing for each release (release
    order) and, per percentile, the band of that release's repeats (None for a release run once)."""

    series_key: str
    metric: str
    basis: str
    label: str
    rows: tuple[dict[str, Any], ...]
    bands: Mapping[str, tuple[Band | None, ...]]

    @property
    def releases(self) -> list[str]:
        return [str(r["version"]) for r in self.rows]

    def series(self, percentile: str) -> Series:
        points = points_of(self.rows, VALUE_COLUMNS[percentile], NOISE_COLUMNS[percentile])
        return Series(self.series_key, self.metric, self.basis, percentile, "version", points)


@dataclass(frozen=True)
class ReleaseMove:
    """A percentile that moved beyond the noise at `release` (against `previous`)."""

    percentile: str
    release: str
    previous: str
    change: ChangePoint

    @property
    def worse(self) -> bool:
        return self.change.worse


def release_histories(
    rows: Iterable[Mapping[str, Any]], spreads: Sequence[Mapping[str, Any]] = ()
) -> list[ReleaseHistory]:
    """Every series key × metric × basis of the history measured on at least two releases. `spreads`: the
    published repeats rows (run_id, cell_id, metric, basis, `<stat>_min_ns`, `<stat>_max_ns`) of the runs."""
    groups: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in sorted(rows, key=lambda r: (str(r["run_date"]), str(r["run_id"]))):
        groups[(str(row["series_key"]), str(row["metric"]), str(row["basis"]))][str(row["version"])] = dict(row)
    by_cell = {(s["run_id"], s["cell_id"], s["metric"], s["basis"]): s for s in spreads}
    out = []
    for (key, metric, basis), per_release in sorted(groups.items()):
        if len(per_release) < 2:
            continue
        ordered = tuple(per_release[v] for v in sorted(per_release, key=release_key))
        found = [by_cell.get((r["run_id"], r["cell_id"], metric, basis)) for r in ordered]
        bands = {p: tuple(_band(s, p) for s in found) for p in SERIES_PERCENTILES}
        out.append(ReleaseHistory(key, metric, basis, str(ordered[-1].get("label") or ""), ordered, bands))
    return out


def _band(spread: Mapping[str, Any] | None, percentile: str) -> Band | None:
    if spread is None:
        return None
    name = VALUE_COLUMNS[percentile].removesuffix("_ns")
    low, high = spread.get(f"{name}_min_ns"), spread.get(f"{name}_max_ns")
    return None if low in (None, "") or high in (None, "") else (float(low), float(high))


def moves(history: ReleaseHistory, settings: Settings | None = None) -> list[ReleaseMove]:
    """Every percentile's first move beyond the noise, in release order of where it happened."""
    settings = settings or Settings()
    found = [m for p in SERIES_PERCENTILES if (m := first_move(history, p, settings)) is not None]
    return sorted(found, key=lambda m: (release_key(m.release), SERIES_PERCENTILES.index(m.percentile)))


def first_move(history: ReleaseHistory, percentile: str, settings: Settings) -> ReleaseMove | None:
    """The first release at which `percentile` moved beyond the noise, or None."""
    series = history.series(percentile)
    if len(series.points) < 2:
        return None
    for change in _changes(series, settings):
        if abs(change.relative_change) > bar(settings.magnitude, change.noise) and _left_band(
            history, percentile, change
        ):
            return ReleaseMove(percentile, change.versions_after[0], change.versions_before[-1], change)
    return None


def _changes(series: Series, settings: Settings) -> list[ChangePoint]:
    if len(series.points) >= settings.min_points:
        return otava_change_points(series, settings)
    one_back = replace(settings, baseline_runs=1, min_baseline_runs=1)
    found = (baseline_change(series, i, one_back) for i in range(1, len(series.points)))
    return [c for c in found if c is not None]


def _left_band(history: ReleaseHistory, percentile: str, change: ChangePoint) -> bool:
    """The value after the move lies outside the band of the release before it (no band: nothing to leave)."""
    bands = history.bands[percentile]
    before = history.releases.index(change.versions_before[-1])
    after = history.releases.index(change.versions_after[0])
    previous, moved = bands[before], history.rows[after][VALUE_COLUMNS[percentile]]
    return previous is None or moved is None or not previous[0] <= float(moved) <= previous[1]


def tail_verdict(found: Sequence[ReleaseMove]) -> ReleaseMove | None:
    """The first release whose tail (p99 and beyond, or the max) moved worse beyond the noise."""
    return next((m for m in found if m.percentile in TAIL and m.worse), None)
