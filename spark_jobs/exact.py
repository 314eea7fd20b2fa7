"""Exact percentiles in Spark with numpy's `inverted_cdf` definition (bench_tasks.core.percentiles), in two passes.

For n sorted samples the percentile p is the k-th smallest with k = max(1, ceil(n · p/100)), the product
taken in float64 exactly as numpy takes it, so the values are identical to `np.quantile(...,
method="inverted_cdf")` and to the generator's own tables — every reported value is an observed latency.
Nothing is sampled or interpolated (Spark's percentile_approx was off by up to 112 % at p99.9999 here), and
no group's values are ever collected or sorted as a whole:

1. **Count** the samples per group × log bucket (`log_bucket`: 2^BUCKET_BITS buckets per doubling, a
   monotone function of the value) — a plain aggregation whose result is small.
2. **Locate** each wanted rank in that bucket table (a running count per group), collected to the driver
   (spark_jobs.locate: pandas, milliseconds where each Spark query of it cost a job): the k-th smallest value
   is the (k − samples below its bucket)-th smallest inside one bucket.
3. **Pick**: a second pass over the samples keeps only the rows of those few buckets and ranks them.

Count, min, max and sum come from the bucket table exactly; the standard deviation (population, like numpy)
is merged from per-bucket moments with Chan's formula. A bucket spans 0.5 % of its values, so its own sum of
squares cancels only within that sliver, a vanishing share of the group's spread. A located bucket whose
samples are all equal, or whose first or last sample is the one wanted, needs no second look: its min or max
is the value (a constant send lag would otherwise bring every sample into the pick). A percentile whose group
has fewer than 1/(1−p) samples is null and listed in `unsupported`, never a number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

from bench_tasks import PERCENTILES
from spark_jobs import locate
from spark_jobs.codegen import compiled
from spark_jobs.localdata import pandas_frame, typed

BUCKET_BITS = 7  # 128 buckets per doubling: each 0.54 % wide, the second pass reads ~1 % of the samples
PARTIALS = ("n", "vmin", "vmax", "vsum", "vsq")  # what a bucket aggregation keeps per group × bucket


def percentile_column(percentile: str) -> str:
    """Column name of a percentile: `99.9` → `p99_9_ns` (units in names, STYLE 3)."""
    return f"p{percentile.replace('.', '_')}_ns"


PERCENTILE_COLUMNS: tuple[str, ...] = tuple(percentile_column(p) for p in PERCENTILES)


def log_bucket(value: Column, bits: int = BUCKET_BITS) -> Column:
    """floor(log2(v) · 2^bits) for v ≥ 1; values below 1 mirror it downwards from -1 (0 → -1). Monotone in v
    (Java's log is semi-monotonic, scaling by 2^bits exact), which is all the exact method needs; with bits ≥ 4,
    `bucket >> (bits - 4)` is exactly the histogram's floor(log2(v) · 16)."""
    scale = F.lit(float(1 << bits))
    up = F.floor(F.log2(value) * scale)
    down = F.lit(-1) - F.floor(F.log2(F.lit(1) - value) * scale)
    return F.when(value >= 1, up).otherwise(down).cast("int")


def bucket_bounds(bucket: int, bits: int = BUCKET_BITS) -> tuple[int, int]:
    """Integers (lo, hi) with lo ≤ v ≤ hi for every v in `bucket` of log_bucket, a little wider than the
    bucket (its float edges are not recomputed exactly here; a wider range only lets more rows through)."""
    scale, slack = float(1 << bits), 1e-9
    if bucket >= 0:
        low, high = 2.0 ** (bucket / scale), 2.0 ** ((bucket + 1) / scale)
        return math.floor(low * (1 - slack)) - 1, math.ceil(high * (1 + slack)) + 1
    mirrored = -1 - bucket
    low, high = 1 - 2.0 ** ((mirrored + 1) / scale), 1 - 2.0 ** (mirrored / scale)
    return math.floor(low - abs(low) * slack) - 1, math.ceil(high + abs(high) * slack) + 1


def partials(value: Column) -> list[Column]:
    """The aggregates a bucket table keeps (PARTIALS) of the samples in value."""
    return [
        F.count(value).alias("n"),
        F.min(value).alias("vmin"),
        F.max(value).alias("vmax"),
        F.sum(value).alias("vsum"),
        F.sum(value.cast("double") * value.cast("double")).alias("vsq"),
    ]


def pick(candidates: DataFrame, unknown: DataFrame, keys: Sequence[str], value: str = "value_ns") -> DataFrame:
    """keys, percentile, value: the local_rank-th smallest candidate of each bucket in `unknown` (keys, bucket,
    percentile, local_rank: locate.unknown as local data). `candidates` are the samples (keys, bucket, value) of
    at least those buckets; only they are ever sorted."""
    on = [*keys, "bucket"]
    joined = candidates.select(*on, F.col(value).alias("_v")).join(F.broadcast(unknown), on)
    order = Window.partitionBy(*on, "percentile").orderBy("_v")
    ranked = joined.select(*keys, "percentile", "local_rank", "_v", F.row_number().over(order).alias("_rn"))
    return ranked.where(F.col("_rn") == F.col("local_rank")).select(*keys, "percentile", F.col("_v").alias("value"))


def summary_schema(key_fields: Sequence[StructField], percentiles: Sequence[str] = PERCENTILES) -> StructType:
    """The schema of a summary: the key columns, count, min, max, mean, stddev, one column per percentile and
    `unsupported`."""
    stats = [StructField(c, LongType()) for c in ("count", "min_ns", "max_ns")]
    stats += [StructField(c, DoubleType()) for c in ("mean_ns", "stddev_ns")]
    values = [StructField(percentile_column(p), LongType()) for p in percentiles]
    return StructType([*key_fields, *stats, *values, StructField("unsupported", ArrayType(StringType()))])


def unknown_schema(key_fields: Sequence[StructField]) -> StructType:
    """The schema of locate.unknown's rows as pick reads them."""
    rank = [StructField("bucket", IntegerType()), StructField("percentile", StringType())]
    return StructType([*key_fields, *rank, StructField("local_rank", LongType())])


Candidates = Callable[[pd.DataFrame], DataFrame]  # locate.unknown's rows -> the samples (keys, bucket, value) of them


def summary_of(
    placed: pd.DataFrame,
    fields: Sequence[StructField],
    candidates: Candidates,
    value: str,
    percentiles: Sequence[str] = PERCENTILES,
    wanted: locate.Wanted | None = None,
) -> pd.DataFrame:
    """The summary (on the driver, typed as summary_schema) of the groups keyed by `fields` whose bucket table is
    `placed` (locate.place): their ranks located on the driver, the values no bucket's min or max gives picked
    in Spark from `candidates` of the buckets that hold them."""
    spark, keys = SparkSession.active(), [f.name for f in fields]

    def looked_up(rows: pd.DataFrame) -> pd.DataFrame:
        unknown = pandas_frame(spark, rows, unknown_schema(fields))
        with compiled(spark):
            return pick(candidates(rows), unknown, keys, value).toArrow().to_pandas()

    columns = {p: percentile_column(p) for p in percentiles}
    summary = locate.summary_rows(placed, keys, looked_up, columns, wanted)
    return typed(summary, summary_schema(fields, percentiles))


def summarize(
    samples: DataFrame, keys: Sequence[str], value: str = "value_ns", percentiles: Sequence[str] = PERCENTILES
) -> DataFrame:
    """Per group of `keys` (non-null): count, min_ns, max_ns, mean_ns, stddev_ns (population, like numpy), one
    column per percentile (null when unsupported) and `unsupported`, as local data. Reads `samples` twice (count,
    then pick); between them the bucket table is collected and located on the driver (spark_jobs.locate)."""
    fields = [samples.schema[k] for k in keys]
    bucketed = samples.select(*keys, F.col(value).alias("_v")).withColumn("bucket", log_bucket(F.col("_v")))
    with compiled(samples.sparkSession):
        table = bucketed.groupBy(*keys, "bucket").agg(*partials(F.col("_v"))).toArrow().to_pandas()
    located = StructType([*fields, StructField("bucket", IntegerType())])

    def candidates(rows: pd.DataFrame) -> DataFrame:
        buckets = pandas_frame(samples.sparkSession, rows[located.names].drop_duplicates(), located)
        return bucketed.join(F.broadcast(buckets), [*keys, "bucket"], "left_semi")

    summary = summary_of(locate.place(table, keys), fields, candidates, "_v", percentiles)
    return pandas_frame(samples.sparkSession, summary, summary_schema(fields, percentiles))
