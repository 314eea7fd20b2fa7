"""Exact percentiles in Spark with numpy's `inverted_cdf` definition (bench_tasks.core.percentiles).

For n sorted samples the percentile p is the k-th smallest with k = max(1, ceil(n · p/100)), the product
taken in float64 exactly as numpy takes it, so the values are identical to `np.quantile(...,
method="inverted_cdf")` and to the generator's own tables — every reported value is an observed latency.
Computed as one sort per group (row_number over a window) and one aggregation; nothing is sampled
(Spark's percentile_approx was off by up to 112 % at p99.9999 here). A percentile whose group has fewer
than 1/(1−p) samples is null and listed in `unsupported`, never a number.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from bench_tasks import PERCENTILES, required_samples


def percentile_column(percentile: str) -> str:
    """Column name of a percentile: `99.9` → `p99_9_ns` (units in names, STYLE 3)."""
    return f"p{percentile.replace('.', '_')}_ns"


PERCENTILE_COLUMNS: tuple[str, ...] = tuple(percentile_column(p) for p in PERCENTILES)


def _rank(percentile: str, n: Column) -> Column:
    quantile = float(Decimal(percentile) / Decimal(100))
    return F.greatest(F.lit(1).cast("long"), F.ceil(n.cast("double") * F.lit(quantile)).cast("long"))


def summarize(
    samples: DataFrame, keys: Sequence[str], value: str = "value_ns", percentiles: Sequence[str] = PERCENTILES
) -> DataFrame:
    """Per group of `keys`: count, min_ns, max_ns, mean_ns, stddev_ns (population, like numpy), one column per
    percentile (null when unsupported) and `unsupported` (the percentiles left null for lack of samples)."""
    group = Window.partitionBy(*keys)
    ranked = samples.select(
        *keys,
        F.col(value).alias("_v"),
        F.row_number().over(group.orderBy(F.col(value))).alias("_rn"),
        F.count(F.lit(1)).over(group).alias("_n"),
    )
    n = F.col("_n")
    picks = [F.max(F.when(F.col("_rn") == _rank(p, n), F.col("_v"))).alias(percentile_column(p)) for p in percentiles]
    summary = ranked.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("count"),
        F.min("_v").alias("min_ns"),
        F.max("_v").alias("max_ns"),
        F.avg("_v").alias("mean_ns"),
        F.stddev_pop("_v").alias("stddev_ns"),
        *picks,
    )
    supported = {p: F.col("count") >= F.lit(required_samples(p)) for p in percentiles}
    unsupported = F.filter(
        F.array(*[F.when(~supported[p], F.lit(p)) for p in percentiles]), lambda x: x.isNotNull()
    ).alias("unsupported")
    return summary.select(
        *keys,
        F.col("count").cast("long"),
        "min_ns",
        "max_ns",
        "mean_ns",
        "stddev_ns",
        *[F.when(supported[p], F.col(percentile_column(p))).alias(percentile_column(p)) for p in percentiles],
        unsupported,
    )
