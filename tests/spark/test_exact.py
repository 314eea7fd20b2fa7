"""Exact percentiles in Spark against numpy's inverted_cdf and the harness's own summarize()."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import SparkSession

from bench_tasks import PERCENTILES, summarize
from spark_jobs.exact import percentile_column
from spark_jobs.exact import summarize as spark_summarize


def _frame(spark: SparkSession, groups: dict[str, np.ndarray]):
    frame = pd.DataFrame(
        {
            "g": np.concatenate([[g] * len(v) for g, v in groups.items()]),
            "value_ns": np.concatenate(list(groups.values())),
        }
    )
    return spark.createDataFrame(frame.astype({"value_ns": "int64"}), "g string, value_ns long")


def test_known_answers_and_unsupported_flags(spark: SparkSession) -> None:
    """1..10: p50 is the 5th value, p90 the 9th; p99 needs 100 samples so it is null and flagged."""
    row = spark_summarize(_frame(spark, {"a": np.arange(1, 11)}), ["g"]).collect()[0]
    assert (row["count"], row.min_ns, row.max_ns, row.mean_ns) == (10, 1, 10, 5.5)
    assert (row.p50_ns, row.p90_ns, row.p99_ns) == (5, 9, None)
    assert row.unsupported == ["99", "99.9", "99.99", "99.999", "99.9999"]
    assert row.stddev_ns == pytest.approx(np.std(np.arange(1, 11)))


def test_single_sample_and_ties(spark: SparkSession) -> None:
    rows = {
        r.g: r
        for r in spark_summarize(_frame(spark, {"one": np.array([7]), "ties": np.array([3, 3, 3, 9])}), ["g"]).collect()
    }
    # p50 needs 1/(1-0.5) = 2 samples: one sample gives its max, never a "median"
    assert (rows["one"].p50_ns, rows["one"].max_ns, rows["one"].stddev_ns) == (None, 7, 0.0)
    assert rows["ties"].p50_ns == 3 and rows["ties"].p90_ns is None  # p90 needs 10 samples


def test_equals_numpy_on_heavy_tails(spark: SparkSession) -> None:
    """Every supported percentile is identical to numpy's; the largest relative difference is 0."""
    rng = np.random.default_rng(7)
    groups = {
        "lognormal_200k": (rng.lognormal(12, 1.2, 200_000)).astype(np.int64),
        "pareto_12345": (rng.pareto(1.5, 12_345) * 1e5).astype(np.int64),
        "stall_1001": np.concatenate([np.full(999, 400_000), [1_400_000_000] * 2]).astype(np.int64),
        "uniform_99": rng.integers(0, 10**9, 99),
    }
    got = {r.g: r for r in spark_summarize(_frame(spark, groups), ["g"]).collect()}
    worst = 0.0
    for name, values in groups.items():
        want = summarize(values)
        row = got[name]
        assert (row["count"], row.min_ns, row.max_ns) == (want.count, want.min_ns, want.max_ns)
        assert row.mean_ns == pytest.approx(want.mean_ns, rel=1e-12)
        assert row.stddev_ns == pytest.approx(want.stddev_ns, rel=1e-9)
        for p in PERCENTILES:
            spark_value = getattr(row, percentile_column(p))
            assert spark_value == want.percentiles[p], (name, p)
            if spark_value is not None:
                # the quantile as bench_tasks forms it: float(0.9999) exactly, not float(99.99) / 100
                q = np.quantile(values, float(Decimal(p) / 100), method="inverted_cdf")
                worst = max(worst, abs(spark_value - q) / q)
        assert row.unsupported == [p for p in PERCENTILES if want.percentiles[p] is None]
    assert worst == 0.0
    # 2 of 1001 samples (0.2 %) saw a 1.4 s stall: p99.9 is the 1000th value, a stalled one
    assert got["stall_1001"].p99_9_ns == 1_400_000_000
