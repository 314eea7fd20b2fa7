"""Change points and alerts: pure functions over ordered series, and `detect`, which reads the lake first.

Long histories go to Apache Otava (E-divisive means split in sliding windows, then the t-test merge of
Fleming et al., "Hunter", ICPE 2023). Histories shorter than `Settings.min_points` are too short for that,
so the checked run is compared with the median and min–max of the runs before it instead.

The alert rule: the checked run (the newest by default) lies in the segment after a change point that made
the series worse (a latency higher, a capacity lower) by more than `magnitude` — or, for a repeated cell, by
more than its repeats' own run-to-run variation when that is larger (`bar`) — (p ≤ `max_pvalue` for Otava's
points). Improvements and earlier
shifts are recorded as change points but do not alert; an alert stays up, night after night, until a later
change point (the fix) starts a new segment — its `run_id` says which shift it is, so a notifier can dedupe.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..lake.storage import S3Path
from .history import read_capacity_history, read_history
from .model import Alert, ChangePoint, Point, RegressionError, RegressionResult, Series, Settings
from .series import build_capacity_series, build_series, counted_capacity, nightly_key, release_key


@dataclass(frozen=True)
class Split:
    """One change point as Otava reports it: index of the first point after the shift, segment means, p-value."""

    index: int
    mean_before: float
    mean_after: float
    p_value: float


def otava_splits(values: Sequence[float | None], settings: Settings) -> list[Split]:
    """Otava's change points of `values`, as plain Python numbers.

    Otava's contract: gaps filled with `fill_missing` first and a plain list, not a numpy array. Series built
    from the history never contain None (unsupported points are left out), so the fill is a no-op for them;
    it matters for callers that pass an aligned series with gaps. Otava is imported here: it brings SciPy (1.5 s of
    imports), which whatever imports this package only to read the history (every cell's provision asks
    `history.published_run`) has no use for."""
    from otava.analysis import TTestSignificanceTester, compute_change_points, fill_missing

    data: list[Any] = [None if v is None else float(v) for v in values]
    fill_missing(data)
    if any(v is None for v in data):
        return []  # all None: nothing to analyse
    change_points, _weak = compute_change_points(
        data,
        window_len=settings.window_len,
        max_pvalue=settings.max_pvalue,
        min_magnitude=settings.magnitude,
    )
    # Otava 0.8.0's merge step, after dropping a weak change point, recomputes the stats of the points to its
    # right but not of the one to its left, which keeps the means and p-value of a segment that no longer exists
    # (seen here: a 20 % rise reported as +26 % over the 3 runs up to a dropped weak point instead of the 10
    # runs after it). Recompute every point's t-test over the final segmentation with Otava's own tester.
    tester = TTestSignificanceTester(settings.max_pvalue)
    intervals = tester.get_intervals(change_points)
    final = [tester.change_point(cp.to_candidate(), data, intervals) for cp in change_points]
    return [
        Split(int(cp.index), float(cp.stats.mean_1), float(cp.stats.mean_2), float(cp.stats.pvalue)) for cp in final
    ]


def _unique(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(values))


def _versions(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(values), key=release_key))


def _record(
    series: Series,
    settings_magnitude: float,
    method: str,
    index: int,
    before: slice,
    after: slice,
    before_value: float,
    after_value: float,
    p_value: float | None,
    spread: tuple[float, float] | None = None,
) -> ChangePoint:
    """`before_value`, `after_value` and `spread` in the series' point unit; the record shows them in the unit
    people read."""
    left, right = series.points[before], series.points[after]
    first = series.points[index]
    noise = repeat_noise((*left, *right))
    quantity = series.quantity
    return ChangePoint(
        series_key=series.series_key,
        metric=series.metric,
        basis=series.basis,
        percentile=series.percentile,
        view=series.view,
        method=method,
        label=first.label,
        system=first.system,
        index=index,
        run_date=first.run_date,
        run_id=first.run_id,
        before=quantity.shown(before_value),
        after=quantity.shown(after_value),
        unit=quantity.shown_unit,
        higher_is_worse=quantity.higher_is_worse,
        relative_change=(after_value / before_value - 1.0) if before_value else 0.0,
        p_value=p_value,
        cell_ids=_unique(p.cell_id for p in (*left, *right)),
        runs_before=tuple(p.run_id for p in left),
        runs_after=tuple(p.run_id for p in right),
        versions_before=_versions(p.version for p in left),
        versions_after=_versions(p.version for p in right),
        spread=None if spread is None else (quantity.shown(spread[0]), quantity.shown(spread[1])),
        noise=noise,
        threshold=bar(settings_magnitude, noise),
    )


def repeat_noise(points: Iterable[Point]) -> float | None:
    """Median run-to-run variation (fraction) of the points that have one (repeated cells); None otherwise."""
    noise = [p.noise for p in points if p.noise is not None]
    return statistics.median(noise) if noise else None


def bar(magnitude: float, noise: float | None) -> float:
    """The worsening an alert needs: the configured magnitude, raised to the repeats' own noise."""
    return magnitude if noise is None else max(magnitude, noise)


def otava_change_points(series: Series, settings: Settings) -> list[ChangePoint]:
    """Every change point of a long series, each with the runs from the previous change point to the next."""
    splits = otava_splits([p.value for p in series.points], settings)
    bounds = [0, *(s.index for s in splits), len(series.points)]
    return [
        _record(
            series,
            settings.magnitude,
            "otava",
            s.index,
            slice(bounds[i], s.index),
            slice(s.index, bounds[i + 2]),
            s.mean_before,
            s.mean_after,
            s.p_value,
        )
        for i, s in enumerate(splits)
    ]


def baseline_change(series: Series, position: int, settings: Settings) -> ChangePoint | None:
    """The short-history check: the point at `position` against the `baseline_runs` before it. A change only
    when it differs from their median by more than `magnitude` AND lies outside their min–max spread, so a
    noisy baseline raises the bar by itself. None with fewer than `min_baseline_runs` earlier runs."""
    start = max(0, position - settings.baseline_runs)
    baseline = [p.value for p in series.points[start:position]]
    if len(baseline) < settings.min_baseline_runs:
        return None
    median, low, high = statistics.median(baseline), min(baseline), max(baseline)
    value = series.points[position].value
    higher = value > median * (1 + settings.magnitude) and value > high
    lower = value < median * (1 - settings.magnitude) and value < low
    if not (higher or lower):
        return None
    before, after = slice(start, position), slice(position, position + 1)
    return _record(series, settings.magnitude, "baseline", position, before, after, median, value, None, (low, high))


def analyse_series(series: Series, run_id: str, settings: Settings) -> tuple[list[ChangePoint], Alert | None]:
    """Change points of one series and the alert, if the run `run_id` lies after a worsening one."""
    positions = [i for i, p in enumerate(series.points) if p.run_id == run_id]
    if not positions:
        return [], None
    if len(series.points) >= settings.min_points:
        changes = otava_change_points(series, settings)
    else:
        found = baseline_change(series, positions[-1], settings)
        changes = [] if found is None else [found]
    for position in reversed(positions):
        governing = [c for c in changes if c.index <= position]
        last = governing[-1] if governing else None
        significant = last is not None and (last.p_value is None or last.p_value <= settings.max_pvalue)
        if last is not None and significant and last.worsening > bar(settings.magnitude, last.noise):
            return changes, Alert(last, run_id)
    return changes, None


def checked_run(rows: Sequence[dict[str, Any]], run_id: str | None) -> tuple[str, str]:
    """(run_date, run_id) of the run to check: `run_id`, or the newest in the history."""
    if run_id is None:
        return max(nightly_key(r) for r in rows)
    for r in rows:
        if r["run_id"] == run_id:
            return nightly_key(r)
    raise RegressionError(f"run {run_id!r} is not in the published history")


def analyse(
    rows: Sequence[dict[str, Any]],
    settings: Settings,
    run_id: str | None = None,
    capacity: Sequence[dict[str, Any]] = (),
) -> RegressionResult:
    """Pure analysis of history rows (overall rows, as `history.read_history` returns them) and capacity rows
    (`history.read_capacity_history`). History after the checked run is ignored, so an old run can be re-checked
    with the history it had."""
    if not rows:
        raise RegressionError("the history holds no overall (leader null) rows to analyse")
    run_date, run = checked_run([*rows, *capacity], run_id)
    upto = [r for r in rows if nightly_key(r) <= (run_date, run)]
    all_series, unsupported = build_series(upto)
    all_series += build_capacity_series(r for r in capacity if nightly_key(r) <= (run_date, run))
    changes: list[ChangePoint] = []
    alerts: list[Alert] = []
    checked = absent = 0
    for series in all_series:
        if not any(p.run_id == run for p in series.points):
            absent += 1
            continue
        checked += 1
        found, alert = analyse_series(series, run, settings)
        changes += found
        if alert is not None:
            alerts.append(alert)
    harness_bound = sum(1 for r in capacity if r["run_id"] == run and not counted_capacity(r))
    reasons = (
        ("unsupported", unsupported),
        ("no_point_in_checked_run", absent),
        ("capacity_not_the_broker", harness_bound),
    )
    skipped = {k: v for k, v in reasons if v}
    return RegressionResult(run_date, run, settings, tuple(changes), tuple(alerts), checked, skipped)


def detect(
    lake_root: str | Path | S3Path, settings: Settings | None = None, run_id: str | None = None
) -> RegressionResult:
    """Read the lake's published history (latency and capacity) and check `run_id` (default: the newest run)."""
    return analyse(read_history(lake_root), settings or Settings(), run_id, read_capacity_history(lake_root))


def history_series(lake_root: str | Path | S3Path) -> list[Series]:
    """Every series of the lake's history, latency and capacity (the report plots the alerted ones)."""
    return build_series(read_history(lake_root))[0] + build_capacity_series(read_capacity_history(lake_root))
