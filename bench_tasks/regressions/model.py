"""The values regression detection passes around: settings, series points, change points, alerts, results.

Plain frozen dataclasses so the analysis stays pure and every output can be turned into JSON or a Parquet row
without knowing how it was computed. Two quantities are followed (`Quantity`): latency, nanoseconds inside (as in
the lake) and milliseconds in records meant for people, where higher is worse; and a capacity search's capacity,
messages per second, where lower is worse. Every record names its unit beside its values (STYLE 3).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import SixninesError

# Version history of alerts.json and change_points.parquet (STYLE 5):
#   1 — first version.
#   2 — capacity series beside latency: `before`/`after`/`spread` with their `unit` and `higher_is_worse`
#       (were `before_ms`/`after_ms`/`spread_ms`).
RESULTS_SCHEMA_VERSION = 2

NS_PER_MS = 1e6


class RegressionError(SixninesError):
    """The history cannot be analysed as asked (missing or malformed files/columns, bad thresholds).
    Exit code 2: the input is wrong, not the system under test."""

    exit_code = 2


@dataclass(frozen=True)
class Settings:
    """Thresholds of the check; every one is a parameter because the right noise level is per lab (STYLE 11).

    - `magnitude` 0.10: the issue's default; above the ±5 % night-to-night noise of a quiet host, below the
      20 % shifts that matter.
    - `max_pvalue` 0.001: Otava's own default. A nightly run checks hundreds of series (cells × metrics ×
      bases × 8 percentiles); at 0.001 pure noise yields well under one significant split per night, and the
      magnitude filter removes most of those.
    - `window_len` 50: Otava's default; about seven weeks of nightly runs per window.
    - `min_points` 10: below this the history is "short" and the baseline comparison is used instead. Five
      points on either side of a shift are about the least for a t-test to reach p ≤ 0.001 on ±5 % noise.
    - Run-to-run noise: where the matrix repeats a cell, each run records how much its repeats disagreed
      (`<p>_variation_pct`, JLBH's % variation). A shift must then exceed that noise too: the bar is
      max(`magnitude`, median variation of the runs around the shift), so a cell whose repeats vary by 15 %
      cannot alert on a 12 % move.
    - `baseline_runs` 7 / `min_baseline_runs` 3: the fallback compares the newest run with the median and
      min–max of up to a week of earlier runs, and says nothing with fewer than three (no spread to respect).
    """

    magnitude: float = 0.10
    max_pvalue: float = 0.001
    window_len: int = 50
    min_points: int = 10
    baseline_runs: int = 7
    min_baseline_runs: int = 3

    def __post_init__(self) -> None:
        problems = []
        if not 0 < self.magnitude < 10:
            problems.append(f"magnitude must be a fraction in (0, 10), got {self.magnitude}")
        if not 0 < self.max_pvalue < 1:
            problems.append(f"p-value must be in (0, 1), got {self.max_pvalue}")
        if self.window_len < 2:
            problems.append(f"window must be at least 2 points, got {self.window_len}")
        if self.min_points < 4:
            problems.append(f"min_points must be at least 4, got {self.min_points}")
        if not 1 <= self.min_baseline_runs <= self.baseline_runs:
            problems.append(
                f"need 1 ≤ min_baseline_runs ≤ baseline_runs, got {self.min_baseline_runs}, {self.baseline_runs}"
            )
        if problems:
            raise RegressionError("invalid regression settings: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Quantity:
    """What a series follows: the unit of its points, the unit people read, and which way is worse."""

    name: str
    unit: str  # of Point.value
    shown_unit: str  # of ChangePoint.before/after
    per_shown: float  # point units per shown unit
    higher_is_worse: bool

    def shown(self, value: float) -> float:
        return value / self.per_shown


LATENCY = Quantity("latency", "ns", "ms", NS_PER_MS, higher_is_worse=True)
# A capacity search's highest passing rate (bench_tasks.capacity): a release that holds less is the regression.
CAPACITY = Quantity("capacity", "msg/s", "msg/s", 1.0, higher_is_worse=False)


def describe(metric: str, basis: str, percentile: str) -> str:
    """`e2e/intended p99`, or `capacity at e2e p99 < 10ms` for a capacity series (no percentile)."""
    return f"{metric}/{basis} p{percentile}" if percentile else f"{metric} at {basis}"


@dataclass(frozen=True)
class Point:
    """One run's value of one series, with what identifies the run and the cell it came from."""

    run_date: str
    run_id: str
    cell_id: str
    version: str
    label: str
    system: str
    value: float  # in the series' Quantity.unit
    noise: float | None = None  # run-to-run variation across the cell's repeats in this run (fraction), if repeated


@dataclass(frozen=True)
class Series:
    """One ordered history: `view` is "nightly" (run date, run id) or "version" (release order). A capacity
    series has metric "capacity", the search's objectives as basis and no percentile."""

    series_key: str
    metric: str
    basis: str
    percentile: str  # "99.9", …, or "max"; "" for capacity
    view: str
    points: tuple[Point, ...]
    quantity: Quantity = LATENCY

    @property
    def name(self) -> str:
        return f"{self.series_key} {describe(self.metric, self.basis, self.percentile)} ({self.view})"


@dataclass(frozen=True)
class ChangePoint:
    """A significant shift in one series: the runs before it (from the previous change point) and after it (up
    to the next). `method` is "otava" (E-divisive means + t-test; p_value set) or "baseline" (the short-history
    comparison of one run with the median and spread of the runs before it; p_value None: no test is made)."""

    series_key: str
    metric: str
    basis: str
    percentile: str
    view: str
    method: str
    label: str
    system: str
    index: int
    run_date: str  # the first run after the shift
    run_id: str
    before: float  # in `unit`
    after: float
    unit: str  # "ms" (latency) or "msg/s" (capacity)
    higher_is_worse: bool
    relative_change: float  # after / before − 1
    p_value: float | None
    cell_ids: tuple[str, ...]
    runs_before: tuple[str, ...]
    runs_after: tuple[str, ...]
    versions_before: tuple[str, ...]
    versions_after: tuple[str, ...]
    spread: tuple[float, float] | None = None  # baseline min–max in `unit` (method "baseline" only)
    noise: float | None = None  # median run-to-run variation of the runs on both sides (repeated cells only)
    threshold: float | None = None  # the worsening an alert needed: max(magnitude, noise)

    @property
    def worsening(self) -> float:
        """How much worse, as a fraction: the rise of a latency, the fall of a capacity (negative: better)."""
        return self.relative_change if self.higher_is_worse else -self.relative_change

    @property
    def worse(self) -> bool:
        return self.worsening > 0

    @property
    def statistic(self) -> str:
        return describe(self.metric, self.basis, self.percentile)

    def shown(self, value: float) -> str:
        """A value as people read it: 3.142 ms, 32,000 msg/s."""
        return f"{value:,.0f} {self.unit}" if self.unit == "msg/s" else f"{value:.3f} {self.unit}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("cell_ids", "runs_before", "runs_after", "versions_before", "versions_after"):
            out[key] = list(out[key])
        out["spread"] = None if self.spread is None else list(self.spread)
        return out


@dataclass(frozen=True)
class Alert:
    """A regression the checked run is part of: the change point that made its series worse."""

    change: ChangePoint
    checked_run_id: str

    def summary(self) -> str:
        c = self.change
        noise = "" if c.noise is None else f"; repeats vary by {c.noise:.1%}, so the bar was {c.threshold:.1%}"
        return (
            f"{c.label} [{c.series_key}] {c.statistic}: {c.shown(c.before)} → {c.shown(c.after)} "
            f"({c.relative_change:+.1%}{noise}) from run {c.run_id} ({c.run_date})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {"checked_run_id": self.checked_run_id, "summary": self.summary(), **self.change.to_dict()}


@dataclass(frozen=True)
class RegressionResult:
    """What one check found for the run it checked (`run_id`, by default the newest in the history)."""

    run_date: str
    run_id: str
    settings: Settings
    change_points: tuple[ChangePoint, ...]
    alerts: tuple[Alert, ...]
    series_checked: int
    skipped: dict[str, int] = field(default_factory=dict)  # reason → number of series

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "run_date": self.run_date,
            "run_id": self.run_id,
            "settings": self.settings.to_dict(),
            "series_checked": self.series_checked,
            "skipped": dict(self.skipped),
            "alerts": [a.to_dict() for a in self.alerts],
            "change_points": [c.to_dict() for c in self.change_points],
        }
