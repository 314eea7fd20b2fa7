"""The percentile table: one tuple of percentiles, the support rule, and exact computation over raw samples.

Percentiles are computed exactly from raw samples (never averaged, never approximated) with the
inverted-CDF definition, so every reported value is a latency that was actually observed, as
HdrHistogram's `value_at_percentile` would report it. A percentile p needs at least 1/(1-p) samples
to be supported; below that it is reported as None ("unsupported"), never as a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from .percentile_keys import PERCENTILES  # defined apart so a matrix can be read without numpy


def required_samples(percentile: str) -> int:
    """Samples needed to support `percentile`: 1/(1-p), computed in exact decimal arithmetic."""
    p = Decimal(percentile)
    if not Decimal(0) < p < Decimal(100):
        raise ValueError(f"percentile must be in (0, 100), got {percentile}")
    return math.ceil(Decimal(100) / (Decimal(100) - p))


def is_supported(percentile: str, count: int) -> bool:
    """True when `count` samples are enough to state `percentile` as measured."""
    return count >= required_samples(percentile)


@dataclass(frozen=True)
class LatencySummary:
    """Distribution of one latency series, in nanoseconds. `percentiles[p]` is None when unsupported."""

    count: int
    min_ns: int | None
    max_ns: int | None
    mean_ns: float | None
    stddev_ns: float | None
    percentiles: dict[str, int | None] = field(default_factory=dict)

    def as_ms(self) -> dict[str, float | None]:
        """Percentiles and max in milliseconds, keyed like the JSON output (`"99.9"`, …, `"max"`)."""
        out: dict[str, float | None] = {p: (None if v is None else v / 1e6) for p, v in self.percentiles.items()}
        out["max"] = None if self.max_ns is None else self.max_ns / 1e6
        return out

    @classmethod
    def from_dict(cls, d: dict) -> LatencySummary:
        """The summary `to_dict` recorded (result.json, a cells row's results_json), exactly."""
        return cls(d["count"], d["min_ns"], d["max_ns"], d["mean_ns"], d["stddev_ns"], dict(d["percentiles_ns"]))

    def to_dict(self) -> dict:
        return {
            "count": self.count,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
            "mean_ns": self.mean_ns,
            "stddev_ns": self.stddev_ns,
            "percentiles_ns": dict(self.percentiles),
        }


def summarize(values_ns: np.ndarray) -> LatencySummary:
    """Exact distribution of `values_ns` (int64 nanoseconds). Empty input gives an all-None summary."""
    values = np.asarray(values_ns, dtype=np.int64)
    count = int(values.size)
    if count == 0:
        return LatencySummary(0, None, None, None, None, {p: None for p in PERCENTILES})
    supported = [p for p in PERCENTILES if is_supported(p, count)]
    quantiles = [float(Decimal(p) / Decimal(100)) for p in supported]
    computed = np.quantile(values, quantiles, method="inverted_cdf") if supported else np.array([], np.int64)
    by_p = dict(zip(supported, (int(v) for v in computed), strict=True))
    return LatencySummary(
        count=count,
        min_ns=int(values.min()),
        max_ns=int(values.max()),
        mean_ns=float(values.mean()),
        stddev_ns=float(values.std()),
        percentiles={p: by_p.get(p) for p in PERCENTILES},
    )


def format_ns(value_ns: float | None) -> str:
    """Human-readable latency with a unit fitted to its size; `unsupported` for None."""
    if value_ns is None:
        return "unsupported"
    if value_ns >= 1e9:
        return f"{value_ns / 1e9:.3f} s"
    if value_ns >= 1e6:
        return f"{value_ns / 1e6:.3f} ms"
    return f"{value_ns / 1e3:.1f} µs"
