"""The percentile spectrum's math: HdrHistogram's "1/(1−p)" axis and which points may be drawn.

Pure functions on literal inputs. The x axis of a percentile spectrum is 1/(1−p): 90 % sits at 10, 99 % at 100,
99.9 % at 1000, so every added nine gets the same width and the tail is as visible as the median. A point
at 1/(1−p) needs at least that many samples (percentiles.required_samples); beyond the sample count the
spectrum stops instead of extrapolating, exactly as unsupported percentiles are left out of the tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from ..core.percentiles import PERCENTILES, LatencySummary, is_supported

# Tick percentiles of the x axis (strings keep the decimals exact); 0 % is x = 1, the axis origin.
AXIS_TICKS: tuple[str, ...] = ("0", "90", "99", "99.9", "99.99", "99.999", "99.9999")


def tail_x(percentile: str | float) -> float:
    """Position of `percentile` (0 ≤ p < 100) on the 1/(1−p) axis: 0 → 1, 90 → 10, 99.9 → 1000."""
    p = Decimal(str(percentile))
    if not Decimal(0) <= p < Decimal(100):
        raise ValueError(f"percentile must be in [0, 100), got {percentile}")
    return float(Decimal(100) / (Decimal(100) - p))


def tick_label(percentile: str) -> str:
    """`99.99` → `99.99 %`, as HistogramLogAnalyzer labels its axis."""
    return f"{percentile} %"


def axis_ticks(count: int) -> list[tuple[float, str]]:
    """The labelled ticks up to the first one beyond `count` samples, so the axis ends just past the data."""
    ticks = []
    for p in AXIS_TICKS:
        ticks.append((tail_x(p), tick_label(p)))
        if tail_x(p) > count:
            break
    return ticks


def drawn_percentiles(count: int) -> list[str]:
    """The table percentiles a spectrum marks for `count` samples: the supported ones only."""
    return [p for p in PERCENTILES if count > 0 and is_supported(p, count)]


@dataclass(frozen=True)
class Spectrum:
    """One curve: x on the 1/(1−p) axis, latency in ns at each x, plus the max (drawn as its own marker)."""

    x: np.ndarray
    latency_ns: np.ndarray
    count: int
    max_ns: int | None
    marks: dict[str, int]  # the supported table percentiles, exactly as percentiles.summarize states them


def spectrum(values_ns: np.ndarray, points: int = 240) -> Spectrum:
    """Exact latencies (inverted CDF, every value an observed one) at log-spaced x from 1 to the count.

    x = count is p = 1 − 1/count, the highest percentile `count` samples support; nothing beyond is drawn."""
    values = np.asarray(values_ns, dtype=np.int64)
    count = int(values.size)
    if count == 0:
        return Spectrum(np.array([]), np.array([], dtype=np.int64), 0, None, {})
    x = np.unique(np.geomspace(1.0, float(count), num=min(points, max(count, 2))))
    # The same definition as the tables (percentiles.summarize): inverted CDF, so every point was observed.
    latency = np.quantile(values, 1.0 - 1.0 / x, method="inverted_cdf").astype(np.int64)
    drawn = drawn_percentiles(count)
    exact = np.quantile(values, [float(Decimal(p) / 100) for p in drawn], method="inverted_cdf") if drawn else []
    marks = dict(zip(drawn, (int(v) for v in exact), strict=True))
    return Spectrum(x, latency, count, int(values.max()), marks)


def landed_spectrum(summary: LatencySummary) -> Spectrum:
    """A spectrum through the exact percentiles landing recorded (min, the supported table percentiles, max):
    what a cell whose raw samples were pruned can still draw. Fewer points than `spectrum`, none invented."""
    marks = {p: v for p in PERCENTILES if (v := summary.percentiles.get(p)) is not None}
    if not summary.count or summary.min_ns is None or summary.max_ns is None:
        return Spectrum(np.array([]), np.array([], dtype=np.int64), 0, None, {})
    points = [
        (1.0, summary.min_ns),
        *((tail_x(p), v) for p, v in marks.items()),
        (float(summary.count), summary.max_ns),
    ]
    points = sorted(dict(points).items())  # a percentile at x = count gives way to the max
    x = np.array([p for p, _ in points], dtype=float)
    return Spectrum(x, np.array([v for _, v in points], dtype=np.int64), summary.count, summary.max_ns, marks)
