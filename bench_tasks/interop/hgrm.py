"""HdrHistogram's percentile distribution text (`.hgrm`), as Java's `outputPercentileDistribution` prints it.

The `.hgrm` file is what HdrHistogram's online plotter and HistogramLogAnalyzer read and what people put side
by side to compare systems. `hdrh` (the Python port) can print one, but its percentile steps do not round
the way Java's do, its footer says `TotalCount` instead of `Total count` and prints the count as a float, and
its standard deviation is not scaled to the output unit — so a file from it differs from Java's on the
same data. This module walks the histogram the way Java's PercentileIterator does and prints Java's exact
format; a test compares it line by line with the Java reference on the same histogram.

Values are recorded in ns (bench_tasks.core.hdr) and printed in ms (`value_unit_ratio` 1e6), 5 ticks per half
distance, as Java's defaults for latency histograms. Pure functions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from hdrh.histogram import HdrHistogram

from ..core.hdr import new_histogram, record_many

MS_RATIO = 1e6
TICKS_PER_HALF_DISTANCE = 5


@dataclass(frozen=True)
class Row:
    """One line of the distribution: the bucket value reached, its percentile level and cumulative count."""

    value: float
    percentile: float  # a fraction, 0 … 1, as the file prints it
    total_count: int


@dataclass(frozen=True)
class Hgrm:
    """A parsed `.hgrm`: its rows and footer."""

    rows: list[Row]
    mean: float
    stddev: float
    max: float
    total_count: int
    buckets: int
    sub_buckets: int


def next_level(level: float, ticks: int) -> float:
    """Java's PercentileIterator step: `ticks` levels per halving of the distance to 100 %."""
    halvings = int(math.log(100.0 / (100.0 - level)) / math.log(2))
    return level + 100.0 / (ticks * 2 ** (halvings + 1))


def recorded(histogram: HdrHistogram) -> list[tuple[int, int]]:
    """(highest equivalent value, cumulative count) of every non-empty bucket, lowest first."""
    counts = np.asarray(histogram.counts[: histogram.counts_len], dtype=np.int64)
    nonzero = np.flatnonzero(counts)
    cumulative = np.cumsum(counts[nonzero])
    values = [histogram.get_highest_equivalent_value(histogram.get_value_from_index(int(i))) for i in nonzero]
    return list(zip(values, (int(c) for c in cumulative), strict=True))


def percentile_levels(histogram: HdrHistogram, ticks: int = TICKS_PER_HALF_DISTANCE) -> list[tuple[int, float, int]]:
    """(value, percentile level in %, cumulative count) as Java's percentile iteration yields them: every
    level a bucket reaches, then one last step to 100 % at the highest bucket."""
    total = histogram.get_total_count()
    out: list[tuple[int, float, int]] = []
    level = 0.0
    for value, cumulative in recorded(histogram):
        while 100.0 * cumulative / total >= level:
            out.append((value, level, cumulative))
            if cumulative == total:
                return [*out, (value, 100.0, cumulative)]
            level = next_level(level, ticks)
    return out


def java_f(value: float, places: int, width: int = 0) -> str:
    """`%<width>.<places>f` as Java's Formatter prints it: the double's shortest decimal form rounded half up
    (Python rounds the exact binary value half to even, so 0.9997802734375 would end in 7, not 8)."""
    text = f"{Decimal(repr(float(value))).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"
    return text.rjust(width)


def format_hgrm(
    histogram: HdrHistogram, value_unit_ratio: float = MS_RATIO, ticks: int = TICKS_PER_HALF_DISTANCE
) -> str:
    """The histogram's percentile distribution, byte for byte in Java's `outputPercentileDistribution` format."""
    digits = histogram.significant_figures
    lines = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}", ""]
    for value, level, cumulative in percentile_levels(histogram, ticks):
        fraction = level / 100.0
        row = f"{java_f(value / value_unit_ratio, digits, 12)} {java_f(fraction, 12, 2)} {cumulative:10d}"
        lines.append(row if level == 100.0 else f"{row} {java_f(1 / (1.0 - fraction), 2, 14)}")
    mean = java_f(histogram.get_mean_value() / value_unit_ratio, digits, 12)
    stddev = java_f(histogram.get_stddev() / value_unit_ratio, digits, 12)
    top = java_f(histogram.get_max_value() / value_unit_ratio, digits, 12)
    lines += [
        f"#[Mean    = {mean}, StdDeviation   = {stddev}]",
        f"#[Max     = {top}, Total count    = {histogram.get_total_count():12d}]",
        f"#[Buckets = {histogram.bucket_count:12d}, SubBuckets     = {histogram.sub_bucket_count:12d}]",
    ]
    return "\n".join(lines) + "\n"


def hgrm_of(values_ns: np.ndarray) -> str:
    """The `.hgrm` of raw latencies in ns (printed in ms); empty input gives the header and a zero footer."""
    histogram = new_histogram()
    record_many(histogram, values_ns)
    return format_hgrm(histogram)


def _row(line: str, number: int) -> Row:
    fields = line.split()
    try:
        if len(fields) not in (3, 4):
            raise ValueError
        return Row(float(fields[0]), float(fields[1]), int(fields[2]))
    except ValueError:
        raise ValueError(f"line {number}: {line!r} is not `value percentile count [1/(1-p)]`") from None


def parse_hgrm(text: str) -> Hgrm:
    """Read a `.hgrm` back (Java's or ours): rows, then the three footer lines. ValueError on anything else."""
    rows: list[Row] = []
    footer: dict[str, float] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.split()[0] == "Value":
            continue
        if line.startswith("#["):
            for part in line[2:].rstrip("]").split(","):
                key, _, value = part.partition("=")
                footer[key.strip()] = float(value)
            continue
        rows.append(_row(line, number))
    return Hgrm(
        rows,
        footer["Mean"],
        footer["StdDeviation"],
        footer["Max"],
        int(footer["Total count"]),
        int(footer["Buckets"]),
        int(footer["SubBuckets"]),
    )
