"""Run-to-run variation of repeated cells (matrix `repeats:`), from the per-repeat percentile rows.

For each repeated cell × metric × basis and each statistic (p50 … p99.9999, max): how many repeats support
it, and its min, median and max across the repeats with the % variation as JLBH prints it
(bench_tasks.core.variation, the same formula in plain Python; tests compare the two). The cell's published
percentiles themselves come from all its repeats' samples merged (spark_jobs.percentiles), never from these.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from bench_tasks import PERCENTILES
from spark_jobs.exact import percentile_column
from spark_jobs.samples import MERGED_KEYS

STATISTIC_COLUMNS: tuple[str, ...] = (*(percentile_column(p) for p in PERCENTILES), "max_ns")


def stat_name(column: str) -> str:
    """`p99_9_ns` → `p99_9`, `max_ns` → `max`: the prefix of a statistic's spread columns."""
    return column.removesuffix("_ns")


def variation_column(column: str) -> str:
    """The percentile table's column holding the % variation of statistic `column` across repeats."""
    return f"{stat_name(column)}_variation_pct"


def _variation(low: Column, high: Column) -> Column:
    denominator = high + low / F.lit(2.0)
    return F.when(denominator == 0, F.lit(0.0)).otherwise(F.lit(100.0) * (high - low) / denominator)


def spread_table(by_repeat: DataFrame) -> DataFrame:
    """One row per repeated cell × metric × basis (overall rows; leader breakdowns are not repeated)."""
    keys = [*MERGED_KEYS, "metric", "basis"]
    aggregates = [F.count(F.lit(1)).alias("repeats")]
    for column in STATISTIC_COLUMNS:
        name, value = stat_name(column), F.col(column).cast("double")
        aggregates += [
            F.count(value).alias(f"{name}_values"),
            F.min(value).alias(f"{name}_min_ns"),
            F.median(value).alias(f"{name}_median_ns"),
            F.max(value).alias(f"{name}_max_ns"),
        ]
    grouped = by_repeat.where(F.col("leader").isNull()).groupBy(*keys).agg(*aggregates).where(F.col("repeats") > 1)
    variations = [
        F.when(
            F.col(f"{stat_name(c)}_values") >= 2,
            _variation(F.col(f"{stat_name(c)}_min_ns"), F.col(f"{stat_name(c)}_max_ns")),
        ).alias(variation_column(c))
        for c in STATISTIC_COLUMNS
    ]
    return grouped.select("*", *variations)


def variation_columns(spread: DataFrame) -> DataFrame:
    """The spread reduced to what the percentile table carries: repeats and one variation per statistic."""
    return spread.select(*MERGED_KEYS, "metric", "basis", *[variation_column(c) for c in STATISTIC_COLUMNS])
