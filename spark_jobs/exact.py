"""Exact percentiles in Spark with numpy's `inverted_cdf` definition (bench_tasks.core.percentiles), in two passes.

For n sorted samples the percentile p is the k-th smallest with k = max(1, ceil(n · p/100)), the product
taken in float64 exactly as numpy takes it, so the values are identical to `np.quantile(...,
method="inverted_cdf")` and to the generator's own tables — every reported value is an observed latency.
Nothing is sampled or interpolated (Spark's percentile_approx was off by up to 112 % at p99.9999 here), and
no group's values are ever collected or sorted as a whole:

1. **Count** the samples per group × log bucket (`log_bucket`: 2^BUCKET_BITS buckets per doubling, a
   monotone function of the value) — a plain aggregation whose result is small.
2. **Locate** each wanted rank in that bucket table (a running count per group): the k-th smallest value is
   the (k − samples below its bucket)-th smallest inside one bucket.
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
from decimal import Decimal

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from bench_tasks import PERCENTILES, required_samples

BUCKET_BITS = 7  # 128 buckets per doubling: each 0.54 % wide, the second pass reads ~1 % of the samples
PARTIALS = ("n", "vmin", "vmax", "vsum", "vsq")  # what a bucket aggregation keeps per group × bucket


def percentile_column(percentile: str) -> str:
    """Column name of a percentile: `99.9` → `p99_9_ns` (units in names, STYLE 3)."""
    return f"p{percentile.replace('.', '_')}_ns"


PERCENTILE_COLUMNS: tuple[str, ...] = tuple(percentile_column(p) for p in PERCENTILES)


def rank(percentile: str, n: Column) -> Column:
    """The 1-based rank of `percentile` among n samples: max(1, ceil(n · q)), in float64 as numpy forms it."""
    quantile = float(Decimal(percentile) / Decimal(100))
    return F.greatest(F.lit(1).cast("long"), F.ceil(n.cast("double") * F.lit(quantile)).cast("long"))


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


def _merged_buckets(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Rows of PARTIALS (several per group × bucket allowed) merged to one per group × bucket, with the
    bucket's M2 (sum of squared deviations from its own mean)."""
    merged = rows.groupBy(*keys, "bucket").agg(
        F.sum("n").alias("n"),
        F.min("vmin").alias("vmin"),
        F.max("vmax").alias("vmax"),
        F.sum("vsum").alias("vsum"),
        F.sum("vsq").alias("vsq"),
    )
    m2 = F.col("vsq") - F.pow(F.col("vsum").cast("double"), 2) / F.col("n")
    return merged.withColumn("_m2", F.greatest(F.lit(0.0), m2)).drop("vsq")


Wanted = Callable[[str], Column]  # percentile -> which groups want it (a condition on the key columns)


def place(rows: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Bucket partials (several rows per group × bucket allowed) to one row per group × bucket with the running
    count `_cum` below and including it, the group's `_total` and `_mean`. Small; worth caching when both
    `group_stats` and `ranks` read it."""
    buckets = _merged_buckets(rows, keys)
    group = Window.partitionBy(*keys)
    running = group.orderBy("bucket").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return buckets.select(
        "*",
        F.sum("n").over(running).alias("_cum"),
        F.sum("n").over(group).alias("_total"),
        (F.sum("vsum").over(group) / F.sum("n").over(group)).alias("_mean"),
    )


def group_stats(placed: DataFrame, keys: Sequence[str]) -> DataFrame:
    """keys, count, min_ns, max_ns, mean_ns, stddev_ns: one row per group, exact but for the float moments."""
    spread = F.col("_m2") + F.col("n") * F.pow(F.col("vsum") / F.col("n") - F.col("_mean"), 2)
    return placed.groupBy(*keys).agg(
        F.first("_total").cast("long").alias("count"),
        F.min("vmin").alias("min_ns"),
        F.max("vmax").alias("max_ns"),
        F.first("_mean").alias("mean_ns"),
        F.sqrt(F.sum(spread) / F.first("_total")).alias("stddev_ns"),
    )


def ranks(
    placed: DataFrame, keys: Sequence[str], percentiles: Sequence[str], wanted: Wanted | None = None
) -> DataFrame:
    """keys, bucket, percentile, local_rank, known: the bucket holding each wanted, supported percentile of a
    group, the percentile's rank inside it, and the value itself where the bucket's min or max is it."""
    total, below = F.col("_total"), F.col("_cum") - F.col("n")
    hits = []
    for p in percentiles:
        k = rank(p, total)
        hit = (below < k) & (k <= F.col("_cum")) & (total >= F.lit(required_samples(p)))
        if wanted is not None:
            hit = hit & wanted(p)
        hits.append(F.when(hit, F.struct(F.lit(p).alias("percentile"), (k - below).alias("local_rank"))))
    found = placed.select(
        *keys, "bucket", "n", "vmin", "vmax", F.explode(F.filter(F.array(*hits), lambda h: h.isNotNull())).alias("h")
    )
    local_rank = F.col("h.local_rank")
    known = (
        F.when((F.col("vmin") == F.col("vmax")) | (local_rank == 1), F.col("vmin"))
        .when(local_rank == F.col("n"), F.col("vmax"))
        .alias("known")
    )
    return found.select(*keys, "bucket", "h.percentile", "h.local_rank", known)


def unknown(located: DataFrame) -> DataFrame:
    """The located buckets whose samples must be looked at (keys, bucket)."""
    return located.where(F.col("known").isNull()).drop("known")


def pick(candidates: DataFrame, located: DataFrame, keys: Sequence[str], value: str = "value_ns") -> DataFrame:
    """keys, percentile, value: the local_rank-th smallest candidate of each located bucket (or its known
    value). `candidates` are the samples (keys, bucket, value) of at least the `unknown` buckets; only they
    are ever sorted."""
    on = [*keys, "bucket"]
    joined = candidates.select(*on, F.col(value).alias("_v")).join(F.broadcast(unknown(located)), on)
    order = Window.partitionBy(*on, "percentile").orderBy("_v")
    ranked = joined.select(*keys, "percentile", "local_rank", "_v", F.row_number().over(order).alias("_rn"))
    looked = ranked.where(F.col("_rn") == F.col("local_rank")).select(*keys, "percentile", F.col("_v").alias("value"))
    known = located.where(F.col("known").isNotNull()).select(*keys, "percentile", F.col("known").alias("value"))
    return looked.unionByName(known)


def finish(stats: DataFrame, picked: DataFrame, keys: Sequence[str], percentiles: Sequence[str]) -> DataFrame:
    """One row per group: keys, count, min_ns, max_ns, mean_ns, stddev_ns, one column per percentile (null
    when unsupported) and `unsupported` (the percentiles left null for lack of samples)."""
    wide = picked.groupBy(*keys).agg(
        *[F.max(F.when(F.col("percentile") == p, F.col("value"))).alias(percentile_column(p)) for p in percentiles]
    )
    table = stats.join(wide, list(keys), "left")
    supported = {p: F.col("count") >= F.lit(required_samples(p)) for p in percentiles}
    unsupported = F.filter(
        F.array(*[F.when(~supported[p], F.lit(p)) for p in percentiles]), lambda x: x.isNotNull()
    ).alias("unsupported")
    return table.select(
        *keys,
        "count",
        "min_ns",
        "max_ns",
        "mean_ns",
        "stddev_ns",
        *[F.when(supported[p], F.col(percentile_column(p))).alias(percentile_column(p)) for p in percentiles],
        unsupported,
    )


def summarize(
    samples: DataFrame, keys: Sequence[str], value: str = "value_ns", percentiles: Sequence[str] = PERCENTILES
) -> DataFrame:
    """Per group of `keys` (non-null): count, min_ns, max_ns, mean_ns, stddev_ns (population, like numpy), one
    column per percentile (null when unsupported) and `unsupported`. Reads `samples` twice (count, then pick)."""
    bucketed = samples.select(*keys, F.col(value).alias("_v")).withColumn("bucket", log_bucket(F.col("_v")))
    placed = place(bucketed.groupBy(*keys, "bucket").agg(*partials(F.col("_v"))), keys)
    located = ranks(placed, keys, percentiles)
    wanted = F.broadcast(unknown(located).select(*keys, "bucket").distinct())
    candidates = bucketed.join(wanted, [*keys, "bucket"], "left_semi")
    return finish(group_stats(placed, keys), pick(candidates, located, keys, "_v"), keys, percentiles)
