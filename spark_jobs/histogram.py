"""Histogram job: log-spaced latency buckets per cell × metric × basis (measure phase), for plots.

Bucket b holds latencies in [2^(b/16), 2^((b+1)/16)) ns — 16 buckets per doubling, each about 4.4 % wide,
the same relative resolution from microseconds to seconds; latencies below 1 ns (0) go to bucket -1, whose
bounds are [0, 1). A plain aggregation, so it merges across runs by summing counts. Plots only: the
percentile tables are exact and never read from here.
Run alone: `spark-submit spark_jobs/histogram.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.exact import BUCKET_BITS
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION, merged_facts
from spark_jobs.samples import LAG, MERGED_KEYS, basis_name, metric_name

BUCKETS_PER_DOUBLING = 16
_SHIFT = BUCKET_BITS - 4  # exact.log_bucket >> _SHIFT is floor(log2(v) · 16) (see exact.log_bucket)


def histogram_table(result: Analysis) -> DataFrame:
    """Counts per bucket, with each bucket's bounds and the cumulative fraction up to its upper bound: the
    analysis' bucket table summed (measure phase, a repeated cell's repeats in one histogram)."""
    keys = [*MERGED_KEYS, "metric", "basis"]
    k = float(BUCKETS_PER_DOUBLING)
    measured = result.measured.where(F.col("metric") != LAG)
    bucket = F.when(F.col("bucket") < 0, F.lit(-1)).otherwise(F.shiftright("bucket", _SHIFT)).alias("bucket")
    per_cell = measured.groupBy("cell_ix", "metric", "basis", bucket).agg(F.sum("n").alias("count"))
    cells = F.broadcast(merged_facts(result.facts).select(*MERGED_KEYS, "cell_ix"))
    counts = per_cell.join(cells, "cell_ix").select(
        *MERGED_KEYS,
        metric_name(F.col("metric")).alias("metric"),
        basis_name(F.col("basis")).alias("basis"),
        "bucket",
        "count",
    )
    group = Window.partitionBy(*keys)
    running = group.orderBy("bucket").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return counts.select(
        F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
        *keys,
        "bucket",
        F.when(F.col("bucket") < 0, F.lit(0.0))
        .otherwise(F.pow(F.lit(2.0), F.col("bucket") / F.lit(k)))
        .alias("lower_ns"),
        F.when(F.col("bucket") < 0, F.lit(1.0))
        .otherwise(F.pow(F.lit(2.0), (F.col("bucket") + 1) / F.lit(k)))
        .alias("upper_ns"),
        "count",
        (F.sum("count").over(running) / F.sum("count").over(group)).alias("cumulative_fraction"),
    )


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None) -> list[Path]:
    """Compute the table of the runs (from `raw` when already read) and write one partition per run."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    table = histogram_table(analyze_raw(spark, raw))
    return lakeio.write_tables(lake, raw.runs, {"histogram": table})["histogram"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-histogram", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"histogram: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
