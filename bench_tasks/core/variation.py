"""Run-to-run variation of a repeated cell: min, median and max of each percentile across its repeats, and the
% variation as Chronicle's JLBH prints it in its run summary.

JLBH's formula is `100 · (max − min) / (max + min / 2)` (net.openhft.chronicle.jlbh.PercentileSummary), with
its operator precedence kept as it is, so a figure here reads the same as the JLBH summaries performance
engineers already know; 0 when every repeat agrees. Unlike JLBH no repeat is skipped: each repeat has its own
warmup phase. Repeats whose count could not support a percentile (None) are left out, as JLBH leaves out its
infinite entries; with fewer than two values there is no variation to state.

The Spark job computes the same thing in columns (spark_jobs.repeats); tests hold the two together.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Spread:
    """One statistic across repeats: how many repeats had a value, and their min, median, max and variation."""

    values: int
    min: float
    median: float
    max: float
    variation_pct: float | None


def variation_pct(low: float, high: float) -> float:
    """JLBH's % variation of a min and a max (see the module docstring)."""
    denominator = high + low / 2
    return 0.0 if denominator == 0 else 100.0 * (high - low) / denominator


def spread(values: Iterable[float | None]) -> Spread | None:
    """The spread of one statistic over the repeats; None when no repeat had a value."""
    present = [float(v) for v in values if v is not None]
    if not present:
        return None
    low, high = min(present), max(present)
    return Spread(
        values=len(present),
        min=low,
        median=statistics.median(present),
        max=high,
        variation_pct=variation_pct(low, high) if len(present) >= 2 else None,
    )
