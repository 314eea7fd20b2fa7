"""bench_tasks.interop.hgrm: HdrHistogram's `.hgrm` text, as Java prints it (tests/integration/test_hlog_interop.py
compares it with Java's own output line by line)."""

from __future__ import annotations

import numpy as np
import pytest

from bench_tasks.core.hdr import new_histogram, record_many
from bench_tasks.interop.hgrm import format_hgrm, hgrm_of, java_f, next_level, parse_hgrm, percentile_levels


def test_java_rounds_the_shortest_decimal_half_up() -> None:
    assert java_f(0.9997802734375, 12) == "0.999780273438"  # Python's '%.12f' gives ...437
    assert java_f(2.5, 0) == "3" and java_f(0.125, 2, 8) == "    0.13"
    assert java_f(0.0, 12, 2) == "0.000000000000"


def test_percentile_steps_halve_the_distance_to_100() -> None:
    levels = [0.0]
    for _ in range(12):
        levels.append(next_level(levels[-1], 5))
    assert levels[:6] == pytest.approx([0, 10, 20, 30, 40, 50])
    assert levels[6:11] == pytest.approx([55, 60, 65, 70, 75])  # 10 per half distance → steps of 5


def test_ten_values_of_one_to_ten_ms() -> None:
    histogram = new_histogram()
    record_many(histogram, np.arange(1, 11, dtype=np.int64) * 1_000_000)
    text = format_hgrm(histogram)
    lines = text.splitlines()
    assert lines[0] == "       Value     Percentile TotalCount 1/(1-Percentile)"
    assert lines[1] == ""
    assert lines[2] == "       1.000 0.000000000000          1           1.00"
    assert lines[3] == "       1.000 0.100000000000          1           1.11"
    assert lines[-4] == "      10.002 1.000000000000         10"  # the max bucket's highest equivalent value
    assert lines[-2] == "#[Max     =       10.002, Total count    =           10]"
    assert lines[-3].startswith("#[Mean    =        5.50")
    assert lines[-1].startswith("#[Buckets = ")


def test_every_level_is_reached_in_order_and_ends_at_100() -> None:
    histogram = new_histogram()
    record_many(histogram, np.random.default_rng(1).lognormal(14, 1, 5000).astype(np.int64))
    levels = percentile_levels(histogram)
    assert [lv for _, lv, _ in levels] == sorted(lv for _, lv, _ in levels)
    assert levels[-1][1] == 100.0 and levels[-1][2] == 5000
    counts = [c for _, _, c in levels]
    assert counts == sorted(counts)


def test_parse_back() -> None:
    values = np.random.default_rng(2).integers(100_000, 50_000_000, 2000)
    parsed = parse_hgrm(hgrm_of(values))
    assert parsed.total_count == 2000
    assert parsed.rows[-1].percentile == 1.0 and parsed.rows[-1].total_count == 2000
    assert parsed.max == pytest.approx(values.max() / 1e6, rel=1e-3)
    assert parsed.mean == pytest.approx(values.mean() / 1e6, rel=1e-3)
    p99_exact = np.quantile(values, 0.99, method="inverted_cdf") / 1e6
    at_or_above = min((r for r in parsed.rows if r.percentile >= 0.99), key=lambda r: r.percentile)
    assert at_or_above.value == pytest.approx(p99_exact, rel=2e-3)


def test_a_line_that_is_not_a_row_is_refused() -> None:
    with pytest.raises(ValueError, match="line 3"):
        parse_hgrm("       Value     Percentile TotalCount 1/(1-Percentile)\n\nnot a row\n")
    with pytest.raises(ValueError, match="line 1"):
        parse_hgrm("1.0 0.5\n")
