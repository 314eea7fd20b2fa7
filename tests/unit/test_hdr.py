"""bench_tasks.core.hdr: bulk recording into HdrHistogram, clamping, and the tagged interval log."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from bench_tasks.core.hdr import HIGHEST_NS, LOWEST_NS, new_histogram, record_many, write_hlog
from bench_tasks.core.schedule import NS_PER_S

PERCENTILES = (0.0, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0)


def _one_by_one(values: np.ndarray) -> HdrHistogram:
    histogram = new_histogram()
    for value in values.tolist():
        assert histogram.record_value(value)
    return histogram


def _random_values(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    edges = []
    for k in range(1, 42):  # both sides of every power of two up to ~2.2e12 ns
        edges += [2**k - 1, 2**k, 2**k + 1]
    parts = [
        rng.lognormal(mean=11.0, sigma=2.0, size=50_000),
        rng.integers(1, 5_000, size=5_000),
        rng.integers(1, HIGHEST_NS, size=1_000),
        np.array([LOWEST_NS, 2047, 2048, 2049, 4095, 4096, 4097, HIGHEST_NS, *edges]),
    ]
    values = np.concatenate([p.astype(np.int64) for p in parts])
    return np.clip(values, LOWEST_NS, HIGHEST_NS)


@pytest.mark.parametrize("seed", [1, 2])
def test_record_many_matches_record_value(seed: int) -> None:
    values = _random_values(seed)
    bulk = new_histogram()
    assert record_many(bulk, values) == 0
    single = _one_by_one(values)
    assert bulk.get_total_count() == single.get_total_count() == values.size
    assert bulk.get_max_value() == single.get_max_value()
    assert bulk.get_min_value() == single.get_min_value()
    assert bulk.values_are_equivalent(bulk.get_max_value(), int(values.max()))
    for p in PERCENTILES:
        a, b = bulk.get_value_at_percentile(p), single.get_value_at_percentile(p)
        assert bulk.values_are_equivalent(a, b), p
        assert abs(a - b) <= 0.001 * b, p
    assert bulk.get_mean_value() == pytest.approx(single.get_mean_value(), rel=1e-12)
    assert bulk.equals(single)  # every bucket holds the same count


def test_record_many_percentiles_close_to_exact() -> None:
    values = _random_values(3)
    histogram = new_histogram()
    record_many(histogram, values)
    ordered = np.sort(values)
    for p in (50.0, 90.0, 99.0, 99.9):
        exact = int(ordered[int(np.ceil(p / 100 * values.size)) - 1])
        assert abs(histogram.get_value_at_percentile(p) - exact) <= 0.001 * exact + 1, p


def test_record_many_keeps_small_values_exact() -> None:
    # below 2048 ns every integer has its own bucket
    histogram = new_histogram()
    record_many(histogram, np.array([1, 2, 2, 3, 2047, 2047, 2047]))
    assert histogram.get_count_at_value(1) == 1
    assert histogram.get_count_at_value(2) == 2
    assert histogram.get_count_at_value(3) == 1
    assert histogram.get_count_at_value(2047) == 3
    assert histogram.get_min_value() == 1
    assert histogram.get_max_value() == 2047


def test_record_many_empty() -> None:
    histogram = new_histogram()
    assert record_many(histogram, np.array([], dtype=np.int64)) == 0
    assert histogram.get_total_count() == 0


def test_out_of_range_values_are_clamped_and_counted() -> None:
    histogram = new_histogram()
    values = np.array([0, -5, HIGHEST_NS + 1, 10**15, 5, 1_000], dtype=np.int64)
    assert record_many(histogram, values) == 4
    assert histogram.get_total_count() == 6  # nothing dropped
    assert histogram.get_count_at_value(LOWEST_NS) == 2  # 0 and -5
    assert histogram.get_count_at_value(5) == 1
    assert histogram.get_count_at_value(HIGHEST_NS) == 2  # one hour + 1 ns and 10^15 ns
    assert histogram.values_are_equivalent(histogram.get_max_value(), HIGHEST_NS)
    assert histogram.get_min_value() == LOWEST_NS


def test_range_limits_are_not_clamped() -> None:
    histogram = new_histogram()
    assert record_many(histogram, np.array([LOWEST_NS, HIGHEST_NS])) == 0
    assert histogram.get_total_count() == 2


def test_record_many_accumulates() -> None:
    histogram = new_histogram()
    record_many(histogram, np.array([10, 20]))
    record_many(histogram, np.array([10]))
    assert histogram.get_total_count() == 3
    assert histogram.get_count_at_value(10) == 2


# --- interval log --------------------------------------------------------------------------------------

T0_NS = 7_000_000_000_123
WALL_T0_S = 1_700_000_000.25


def _series(seed: int, n: int, span_ns: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    at = T0_NS + rng.integers(0, span_ns, size=n)
    values = rng.lognormal(mean=12.0, sigma=1.0, size=n).astype(np.int64) + 1
    return at, values


def _read_all(path: Path) -> list[HdrHistogram]:
    reader = HistogramLogReader(str(path), new_histogram())
    out = []
    try:
        while (histogram := reader.get_next_interval_histogram()) is not None:
            out.append(histogram)
    finally:
        reader.input_file.close()
    return out


def test_hlog_reads_back_with_hdrh_reader(tmp_path: Path) -> None:
    path = tmp_path / "cell.hlog"
    series = {"e2e-intended": _series(1, 3_000, 5 * NS_PER_S), "e2e-sent": _series(2, 1_000, 3 * NS_PER_S)}
    write_hlog(path, series, T0_NS, WALL_T0_S)
    intervals = _read_all(path)
    assert intervals
    for tag, (at, values) in series.items():
        mine = [h for h in intervals if h.get_tag() == tag]
        assert sum(h.get_total_count() for h in mine) == values.size
        bins = (at - T0_NS) // NS_PER_S
        for h in mine:
            offset_s = h.get_start_time_stamp() / 1000 - WALL_T0_S
            index = round(offset_s)
            assert offset_s == pytest.approx(index, abs=1e-3)  # starts on the interval grid
            assert h.get_end_time_stamp() - h.get_start_time_stamp() == pytest.approx(1000.0)
            in_bin = values[bins == index]
            assert h.get_total_count() == in_bin.size
            assert h.values_are_equivalent(h.get_max_value(), int(in_bin.max()))
        assert sorted(round(h.get_start_time_stamp() / 1000 - WALL_T0_S) for h in mine) == sorted(set(bins.tolist()))


def test_hlog_lines_parse_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "cell.hlog"
    interval_s = 0.25
    series = {"rtt-intended": _series(3, 2_000, 2 * NS_PER_S), "rtt-sent": _series(4, 500, 2 * NS_PER_S)}
    write_hlog(path, series, T0_NS, WALL_T0_S, interval_s=interval_s)
    lines = path.read_text().splitlines()
    assert lines[0] == "#[Histogram log format version 1.3]"
    assert lines[1].startswith(f"#[StartTime: {WALL_T0_S:.3f} ")
    assert lines[2].startswith(f"#[BaseTime: {WALL_T0_S:.3f} ")
    assert '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"' in lines
    data = [line for line in lines if line.startswith("Tag=")]
    counts: dict[str, int] = {}
    starts: list[float] = []
    for line in data:
        tag_field, start, length, max_ms, encoded = line.split(",")
        tag = tag_field.removeprefix("Tag=")
        histogram = HdrHistogram.decode(encoded)
        at, values = series[tag]
        start_s = float(start)
        index = round(start_s / interval_s)
        assert start_s == pytest.approx(index * interval_s, abs=1e-9)  # a multiple of the interval
        assert float(length) == interval_s
        in_bin = values[(at - T0_NS) // int(interval_s * NS_PER_S) == index]
        assert histogram.get_total_count() == in_bin.size > 0
        assert float(max_ms) == pytest.approx(histogram.get_max_value() / 1e6, abs=5e-4)
        counts[tag] = counts.get(tag, 0) + histogram.get_total_count()
        starts.append(start_s)
    assert counts == {tag: values.size for tag, (_, values) in series.items()}
    assert starts == sorted(starts)  # rows ordered by interval start


def test_hlog_skips_empty_series_and_clamps(tmp_path: Path) -> None:
    path = tmp_path / "cell.hlog"
    at = np.array([T0_NS, T0_NS + 1, T0_NS + NS_PER_S + 5])
    values = np.array([0, 500, HIGHEST_NS * 2])
    write_hlog(path, {"a": (at, values), "empty": (np.array([], np.int64), np.array([], np.int64))}, T0_NS, WALL_T0_S)
    intervals = _read_all(path)
    assert [h.get_tag() for h in intervals] == ["a", "a"]
    assert [h.get_total_count() for h in intervals] == [2, 1]
    assert intervals[0].get_min_value() == LOWEST_NS
    assert intervals[1].values_are_equivalent(intervals[1].get_max_value(), HIGHEST_NS)
