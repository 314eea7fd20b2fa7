"""HdrHistogram helpers: one histogram shape for every latency, bulk recording, and the `.hlog` writer.

Values are nanoseconds, 1 ns to 1 hour, 3 significant digits. Recording a numpy array computes every value's
bucket as HdrHistogram does and adds the counts into its array in one numpy step (hdrhistogram is pinned; the
unit tests compare it bucket by bucket with `record_value`), never a Python call per sample or per bucket.
Values outside the range are clamped to it and counted, never dropped (STYLE 4).

`hdrh`'s HistogramLogWriter cannot write tags and its `output_start_time` is broken in 0.10.8, so the
interval log (format 1.3, tagged per metric and basis) is written here; it opens in HistogramLogAnalyzer
and decodes with `hdrh.log.HistogramLogReader`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

from .schedule import NS_PER_S

LOWEST_NS = 1
HIGHEST_NS = 3600 * NS_PER_S
SIGNIFICANT_DIGITS = 3
HLOG_FORMAT_VERSION = "1.3"
MAX_VALUE_UNIT_RATIO = 1e6  # interval maxima are written in ms, the HdrHistogram convention for ns values


def new_histogram() -> HdrHistogram:
    return HdrHistogram(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)


def record_many(histogram: HdrHistogram, values_ns: np.ndarray) -> int:
    """Record every value; returns how many had to be clamped into range."""
    values = np.asarray(values_ns, dtype=np.int64)
    if values.size == 0:
        return 0
    clamped = int(np.count_nonzero((values < LOWEST_NS) | (values > HIGHEST_NS)))
    values = np.clip(values, LOWEST_NS, HIGHEST_NS)
    # Lowest equivalent value: zero the bits below the bucket's resolution.
    sub_bucket_bits = histogram.sub_bucket_half_count_magnitude + 1
    bit_length = np.frexp(values.astype(np.float64))[1]
    shift = np.maximum(0, bit_length - sub_bucket_bits).astype(np.int64)
    quantized = (values >> shift) << shift
    # Each value's slot in the histogram's counts, as hdrh's `_counts_index_for` computes it, all at once, and
    # the counts added into its array in one step: the live monitor records every worker's progress this way,
    # and a Python call per distinct bucket (hundreds per report) cost the driving process ~0.5 ms a report,
    # CPU taken from the workers and the broker on a small host just as their next message was due.
    unit = histogram.unit_magnitude
    bucket = np.maximum(bit_length, int(histogram.sub_bucket_mask).bit_length()) - unit - sub_bucket_bits
    index = ((bucket + 1) << histogram.sub_bucket_half_count_magnitude) + (
        (values >> (bucket + unit)) - histogram.sub_bucket_half_count
    )
    slots, counts = np.unique(index, return_counts=True)
    np.ctypeslib.as_array(histogram.counts)[slots] += counts.astype(np.uint64)
    histogram.total_count += int(values.size)
    histogram.min_value = min(histogram.min_value, int(quantized.min()))
    histogram.max_value = max(histogram.max_value, int(quantized.max()))
    return clamped


def write_hlog(
    path: Path,
    series: Mapping[str, tuple[np.ndarray, np.ndarray]],
    t0_ns: int,
    wall_t0_s: float,
    interval_s: float = 1.0,
) -> None:
    """Write one interval log: for each tag, `(at_ns, value_ns)` binned into intervals of `at_ns - t0_ns`.

    Timestamps in the log are seconds since the run's t0 (`BaseTime` = wall-clock t0), so every tag's
    intervals line up with the phase boundaries.
    """
    interval_ns = int(interval_s * NS_PER_S)
    lines = [
        f"#[Histogram log format version {HLOG_FORMAT_VERSION}]",
        f"#[StartTime: {wall_t0_s:.3f} (seconds since epoch), "
        f"{dt.datetime.fromtimestamp(wall_t0_s, dt.UTC).isoformat()}]",
        f"#[BaseTime: {wall_t0_s:.3f} (seconds since epoch)]",
        "#[values in nanoseconds; Interval_Max in milliseconds]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    rows: list[tuple[int, str, str]] = []
    for tag, (at_ns, values_ns) in sorted(series.items()):
        at = np.asarray(at_ns, dtype=np.int64)
        values = np.asarray(values_ns, dtype=np.int64)
        if at.size == 0:
            continue
        bins = (at - t0_ns) // interval_ns
        order = np.argsort(bins, kind="stable")
        bins, values = bins[order], values[order]
        edges = np.flatnonzero(np.diff(bins)) + 1
        for chunk_bins, chunk in zip(np.split(bins, edges), np.split(values, edges), strict=True):
            histogram = new_histogram()
            record_many(histogram, chunk)
            start_s = int(chunk_bins[0]) * interval_s
            encoded = histogram.encode().decode()
            max_ms = histogram.get_max_value() / MAX_VALUE_UNIT_RATIO
            rows.append((int(chunk_bins[0]), tag, f"Tag={tag},{start_s:.3f},{interval_s:.3f},{max_ms:.3f},{encoded}"))
    rows.sort(key=lambda r: (r[0], r[1]))
    path.write_text("\n".join(lines + [r[2] for r in rows]) + "\n")
