"""bench_tasks.core.percentiles: the support rule and exact inverted-CDF percentiles."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from bench_tasks.core.percentiles import (
    PERCENTILES,
    LatencySummary,
    format_ns,
    is_supported,
    required_samples,
    summarize,
)


@pytest.mark.parametrize(
    ("percentile", "expected"),
    [
        ("50", 2),
        ("90", 10),
        ("99", 100),
        ("99.9", 1000),
        ("99.99", 10_000),
        ("99.999", 100_000),
        ("99.9999", 1_000_000),
        ("99.99999", 10_000_000),
        ("75", 4),
        ("95", 20),
    ],
)
def test_required_samples_is_exact(percentile: str, expected: int) -> None:
    # In float arithmetic 100/(100-99.9) is 1000.0000000000568 (ceil: 1001) and 100/(100-99.9999) is
    # 999999.99997 (ceil would be right, round-down wrong): only exact decimals give the right count.
    assert required_samples(percentile) == expected


def test_required_samples_rounds_up_when_not_integral() -> None:
    # 100/33.4 = 2.99... -> 3 samples; 100/90 = 1.11... -> 2 samples
    assert required_samples("66.6") == 3
    assert required_samples("10") == 2


@pytest.mark.parametrize("percentile", ["0", "100", "-1", "150"])
def test_required_samples_rejects_out_of_range(percentile: str) -> None:
    with pytest.raises(ValueError, match="percentile must be in"):
        required_samples(percentile)


@pytest.mark.parametrize(
    ("percentile", "count", "supported"),
    [
        ("99.9", 999, False),
        ("99.9", 1000, True),
        ("99.9", 1001, True),
        ("50", 1, False),
        ("50", 2, True),
        ("99.9999", 999_999, False),
        ("99.9999", 1_000_000, True),
        ("99", 0, False),
    ],
)
def test_is_supported_boundaries(percentile: str, count: int, supported: bool) -> None:
    assert is_supported(percentile, count) is supported


def test_summarize_one_to_hundred() -> None:
    summary = summarize(np.arange(1, 101, dtype=np.int64))
    assert summary.count == 100
    assert summary.min_ns == 1
    assert summary.max_ns == 100
    assert summary.mean_ns == pytest.approx(50.5)
    assert summary.stddev_ns == pytest.approx(np.arange(1, 101).std())
    assert summary.percentiles["50"] == 50
    assert summary.percentiles["90"] == 90
    assert summary.percentiles["99"] == 99
    for p in ("99.9", "99.99", "99.999", "99.9999"):
        assert summary.percentiles[p] is None


def test_summarize_ignores_input_order() -> None:
    shuffled = np.random.default_rng(7).permutation(np.arange(1, 101, dtype=np.int64))
    assert summarize(shuffled) == summarize(np.arange(1, 101, dtype=np.int64))


def test_summarize_every_percentile_is_an_observed_sample() -> None:
    # inverted CDF never interpolates: the median of [10, 20] is 10, not 15
    summary = summarize(np.array([20, 10], dtype=np.int64))
    assert summary.percentiles["50"] == 10
    summary = summarize(np.array([5, 1000, 7, 3], dtype=np.int64))
    assert summary.percentiles["50"] == 5
    values = np.array([3, 1_000_000, 17, 17, 250, 9, 4, 4, 80, 1], dtype=np.int64)
    summary = summarize(values)
    assert summary.percentiles["50"] == 9
    assert summary.percentiles["90"] == 250
    observed = set(values.tolist())
    assert all(v in observed for v in summary.percentiles.values() if v is not None)


def test_summarize_support_boundary_999_vs_1000() -> None:
    below = summarize(np.arange(1, 1000, dtype=np.int64))
    at = summarize(np.arange(1, 1001, dtype=np.int64))
    assert below.percentiles["99.9"] is None
    assert below.percentiles["99"] == 990  # ceil(999 * 0.99) = 990
    assert at.percentiles["99.9"] == 999
    assert at.percentiles["99.99"] is None


def test_unsupported_percentiles_are_none_but_max_is_kept() -> None:
    summary = summarize(np.array([7, 3, 1_500_000], dtype=np.int64))
    assert summary.percentiles["50"] == 7
    assert all(summary.percentiles[p] is None for p in PERCENTILES if p != "50")
    assert summary.max_ns == 1_500_000
    assert summary.min_ns == 3
    ms = summary.as_ms()
    assert ms["max"] == pytest.approx(1.5)
    assert ms["50"] == pytest.approx(7e-6)
    assert ms["99"] is None


def test_single_sample_supports_nothing() -> None:
    summary = summarize(np.array([42], dtype=np.int64))
    assert summary.count == 1
    assert summary.min_ns == summary.max_ns == 42
    assert set(summary.percentiles) == set(PERCENTILES)
    assert all(v is None for v in summary.percentiles.values())


def test_summarize_empty() -> None:
    summary = summarize(np.array([], dtype=np.int64))
    assert summary == LatencySummary(0, None, None, None, None, {p: None for p in PERCENTILES})
    ms = summary.as_ms()
    assert ms["max"] is None
    assert set(ms) == {*PERCENTILES, "max"}


def test_as_ms_keys_and_values() -> None:
    summary = summarize(np.arange(1, 101, dtype=np.int64) * 1_000_000)
    ms = summary.as_ms()
    assert list(ms) == [*PERCENTILES, "max"]
    assert ms["50"] == pytest.approx(50.0)
    assert ms["99"] == pytest.approx(99.0)
    assert ms["max"] == pytest.approx(100.0)
    assert ms["99.9"] is None


def test_to_dict_round_trips_the_numbers() -> None:
    summary = summarize(np.array([1, 2, 3, 4], dtype=np.int64))
    d = summary.to_dict()
    assert d["count"] == 4
    assert d["min_ns"] == 1
    assert d["max_ns"] == 4
    assert d["percentiles_ns"]["50"] == 2
    assert d["percentiles_ns"]["90"] is None


def _exact_inverted_cdf(sorted_values: np.ndarray, percentile: str) -> int:
    """The smallest sample x with F(x) >= p, the rank computed in exact decimal arithmetic."""
    rank = math.ceil(Decimal(sorted_values.size) * Decimal(percentile) / Decimal(100))
    return int(sorted_values[max(rank, 1) - 1])


def test_matches_numpy_and_exact_rank_on_lognormal_samples() -> None:
    rng = np.random.default_rng(20240601)
    values = rng.lognormal(mean=12.0, sigma=1.2, size=200_003).astype(np.int64)
    summary = summarize(values)
    ordered = np.sort(values)
    assert summary.count == values.size
    assert summary.max_ns == int(ordered[-1])
    assert summary.min_ns == int(ordered[0])
    assert summary.mean_ns == pytest.approx(float(values.mean()))
    supported = [p for p in PERCENTILES if is_supported(p, values.size)]
    assert supported == ["50", "90", "99", "99.9", "99.99", "99.999"]
    for p in supported:
        expected = int(np.quantile(values, float(Decimal(p) / 100), method="inverted_cdf"))
        assert summary.percentiles[p] == expected, p
        assert summary.percentiles[p] == _exact_inverted_cdf(ordered, p), p
    assert summary.percentiles["99.9999"] is None


@pytest.mark.parametrize("count", [10, 100, 1000, 1001, 9999, 10_000, 12_345, 100_000])
def test_percentile_rank_has_no_float_off_by_one(count: int) -> None:
    # With values 1..n the p-th percentile is exactly ceil(n*p/100): a float rank of k+1e-12 would give k+1.
    values = np.arange(1, count + 1, dtype=np.int64)
    summary = summarize(values)
    for p in PERCENTILES:
        if is_supported(p, count):
            assert summary.percentiles[p] == _exact_inverted_cdf(values, p), p


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "unsupported"),
        (0, "0.0 µs"),
        (1_500, "1.5 µs"),
        (999_999, "1000.0 µs"),
        (1_000_000, "1.000 ms"),
        (2_500_000, "2.500 ms"),
        (3_000_000_000, "3.000 s"),
    ],
)
def test_format_ns(value: float | None, text: str) -> None:
    assert format_ns(value) == text
