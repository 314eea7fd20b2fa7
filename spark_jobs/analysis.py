"""Every statistic of a run's tables in three Spark SQL passes over its raw Parquet, none of which sorts a group
whole. A run's raw files, on a local lake or on S3, are analysed by the cell pass instead (spark_jobs.cellpass: one
Python task per cell, several times faster cold, row for row the same); these passes serve frames built in memory
and raw files the tasks cannot open (spark_jobs.cellpass.route.readable).

1. **Ledger** (spark_jobs.ledger): the keys of every sent and received row, 64 messages to a word — the
   message accounting, the gate's per-producer checks, and where any message arrived twice.
2. **Buckets**: every sample value (samples.sample_rows: e2e, publish/rtt, hops, and the send lag) counted per
   unit × metric × basis × leader × second of its intended time × seconds until done × phase × log bucket
   (exact.log_bucket). Every table's counts, minima, maxima, means, deviations, the timeline's per-second
   counts of completions and sends, and the histogram are sums over this one small table.
3. **Pick**: the ranks of every percentile of every group are located in that table, collected to the driver
   (spark_jobs.locate, in pandas: milliseconds, where the same steps as Spark queries cost a job each), and a
   second read of the samples keeps only the rows of the located buckets (about 1 %), ranks them and picks
   the exact values (exact.pick).

The groups live at four levels (LEVELS) of one key (LEVEL_KEYS), so one window and one pick serve them all.
Between the passes only small tables are kept: on the driver as local data (units, per-producer ledger, the
bucket table, located ranks, the summary), or by the executors (the earliest receipts of the few messages
received twice). The raw Parquet (4 bytes a message) is read again rather than cached: Spark's cache of the
samples would be ten times larger and spill with a 1 GiB driver. Plans are built so that each pass reads it once
(one generator per row, no union of the same source).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from bench_tasks import PERCENTILES
from spark_jobs import ledger as ledger_pass
from spark_jobs import locate
from spark_jobs.codegen import compiled
from spark_jobs.exact import (
    PARTIALS,
    bucket_bounds,
    log_bucket,
    partials,
    summary_of,
    summary_schema,
)
from spark_jobs.levels import (
    DONE,
    DONE_COLUMNS,
    LEADER,
    LEVEL_KEYS,
    MERGED,
    NS_PER_S,
    REPEAT,
    SECOND,
    SECOND_SHIFT,
    TIMED,
    WHOLE,
    WHOLE_COLUMNS,
    level_frame,
    wanted_at,
)
from spark_jobs.localdata import literal_array, rows_frame, typed
from spark_jobs.metrics import BASES, LAG, METRICS
from spark_jobs.samples import Units, first_receipts, key_hash, sample_rows, with_unit

BUCKET_KEYS = ("unit", "metric", "basis", "leader", "sec", "delta", "measure", "bucket")


def second(column: str) -> Column:
    """Whole seconds from the unit's t0 (the timeline's `second`)."""
    return F.floor((F.col(column) - F.col("t0_ns")) / F.lit(NS_PER_S)).cast("long")


def bucketed(samples: DataFrame) -> DataFrame:
    """Sample rows with their second, seconds until done (`delta`) and log bucket."""
    at = second("at_ns")
    return samples.select(
        "unit",
        "metric",
        "basis",
        "leader",
        at.alias("sec"),
        (second("done_ns") - at).alias("delta"),
        "measure",
        "value_ns",
        log_bucket(F.col("value_ns")).alias("bucket"),
    )


def bucket_table(samples: DataFrame) -> DataFrame:
    """The bucket pass: PARTIALS per BUCKET_KEYS."""
    return bucketed(samples).groupBy(*BUCKET_KEYS).agg(*partials(F.col("value_ns")))


def bucket_sums(samples: DataFrame) -> DataFrame:
    """The bucket table summed to what the driver reads, by one job: `kind` WHOLE, the rows per phase over their
    seconds and delays (WHOLE_COLUMNS, measure, PARTIALS); TIMED, every phase's rows per second (`sec`) at their
    coarse bucket (bucket >> SECOND_SHIFT) over leader and delay; DONE, the samples done (sent, received,
    acknowledged) per second (`sec`; `n` counts them). Grouping sets over the bucket table's rows: its samples
    are read once (three aggregations of it, unioned, each read them again), and the result is some 10^4–10^5
    rows where the bucket table has ten times as many."""
    rows = bucket_table(samples).select(
        *WHOLE_COLUMNS,
        "measure",
        "sec",
        F.shiftright("bucket", SECOND_SHIFT).alias("coarse"),
        (F.col("sec") + F.col("delta")).alias("done_sec"),
        *PARTIALS,
    )
    shared = ("unit", "metric", "basis")
    sets = [(*WHOLE_COLUMNS, "measure"), (*shared, "sec", "coarse"), (*shared, "done_sec")]
    columns = {c for group in sets for c in group}
    merged = [getattr(F, how)(name).alias(name) for name, how in locate.SUMS.items()]  # as on the driver
    summed = rows.groupingSets(sets, *sorted(columns)).agg(
        F.when(F.grouping("bucket") == 0, F.lit(WHOLE))
        .when(F.grouping("coarse") == 0, F.lit(TIMED))
        .otherwise(F.lit(DONE))
        .alias("kind"),
        *merged,
    )
    kind = F.col("kind")
    return summed.select(
        "kind",
        *shared,
        "leader",
        "measure",
        F.when(kind == TIMED, F.col("sec")).otherwise(F.col("done_sec")).alias("sec"),
        F.when(kind == TIMED, F.col("coarse")).otherwise(F.col("bucket")).alias("bucket"),
        *PARTIALS,
    )


def _key(level: int, where: Column, g: str, leader: Column, sec: Column, bucket: Column) -> Column:
    none = F.lit(-1)
    key = F.struct(
        F.lit(level).alias("level"),
        F.col(g).cast("long").alias("g"),
        F.coalesce(leader, none).cast("int").alias("leader"),
        F.coalesce(sec, none).cast("long").alias("sec"),
        bucket.alias("bucket"),
    )
    return F.when(where, key)


def at_levels(rows: DataFrame, whole: Column, timed: Column) -> DataFrame:
    """Rows (unit, cell_ix, metric, basis, leader, sec, bucket and their values) once per level they belong to,
    keyed by LEVEL_KEYS: the measure-phase levels where `whole` holds, the per-second level where `timed`
    does. The internal `lag` metric only reaches the repeat level. One generator, so `rows` is computed once."""
    kept, leader, none = F.col("metric") != LAG, F.col("leader"), F.lit(None)
    bucket, coarse = F.col("bucket"), F.shiftright("bucket", SECOND_SHIFT)
    keys = F.array(
        _key(MERGED, whole & kept, "cell_ix", none, none, bucket),
        _key(LEADER, whole & kept & leader.isNotNull(), "cell_ix", leader, none, bucket),
        _key(REPEAT, whole, "unit", none, none, bucket),
        _key(SECOND, timed & kept, "unit", none, F.col("sec"), coarse),
    )
    skip = {"unit", "cell_ix", "metric", "basis", "leader", "sec", "delta", "measure", "bucket"}
    values = [c for c in rows.columns if c not in skip and not c.startswith("_")]
    exploded = rows.select(F.explode(F.filter(keys, lambda k: k.isNotNull())).alias("_k"), "metric", "basis", *values)
    return exploded.select("_k.level", "_k.g", "metric", "basis", "_k.leader", "_k.sec", "_k.bucket", *values)


@dataclass
class Analysis:
    """The small results every table is assembled from, all on the driver as pandas frames (the table modules
    build the tables from them without a Spark job)."""

    units: Units
    ledger: ledger_pass.Ledger
    summary: pd.DataFrame  # SUMMARY_SCHEMA: LEVEL_KEYS, count, min_ns, max_ns, mean_ns, stddev_ns, p…_ns, unsupported
    measured: pd.DataFrame  # bucket_sums' WHOLE rows with cell_ix: WHOLE_COLUMNS, cell_ix, PARTIALS
    done: pd.DataFrame  # bucket_sums' DONE rows: DONE_COLUMNS, n

    @property
    def facts(self) -> pd.DataFrame:
        return self.units.frame


WHOLE_KEYS = ("unit", "metric", "basis", "bucket")  # a located bucket of a measure-phase level, per unit
TIMED_KEYS = ("unit", "metric", "basis", "sec", "coarse")  # … of the per-second level (coarse bucket)


def _hash_set(units: Units, keys: set[tuple], columns: tuple[str, ...], ddl: str, name: str) -> DataFrame:
    """Local data: the distinct samples.key_hash values of `keys` (tuples of `columns`), in column `name`,
    flagged `_n<name>`. Hashed by Spark (a projection of local data: no job) so they match the samples'."""
    spark = units.facts.sparkSession
    frame = rows_frame(spark, sorted(keys), ddl)
    values = sorted({row[0] for row in frame.select(key_hash(*columns)).collect()})
    return rows_frame(spark, [(v, True) for v in values], f"{name} long, _n{name} boolean")


SampleKey = tuple[int, int, int]  # unit, metric, basis
Envelope = dict[SampleKey, list[tuple[int, int]]]  # disjoint value ranges holding the located buckets, ascending
ENVELOPE_RANGES = 4  # ranges per unit × metric × basis (a filter of that many pairs of comparisons)


def _spans(whole: set[tuple], timed: set[tuple]) -> dict[SampleKey, list[tuple[int, int]]]:
    """Per unit × metric × basis, the value range of each of its located buckets (exact.bucket_bounds)."""
    spans: dict[SampleKey, list[tuple[int, int]]] = {}
    for key in whole:
        spans.setdefault(key[:3], []).append(bucket_bounds(key[3]))
    for key in timed:  # a coarse bucket spans 2^SECOND_SHIFT fine ones
        low, high = key[4] << SECOND_SHIFT, (key[4] << SECOND_SHIFT) + (1 << SECOND_SHIFT) - 1
        spans.setdefault(key[:3], []).append((bucket_bounds(low)[0], bucket_bounds(high)[1]))
    return spans


def _joined(ranges: list[tuple[int, int]], limit: int) -> list[tuple[int, int]]:
    """`ranges` sorted, overlapping ones joined, then the two with the smallest gap relative to their values
    joined until at most `limit` remain (the latencies around one percentile cluster; far apart percentiles of a
    long tail keep their own range)."""
    joined: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if joined and low <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(joined[-1][1], high))
        else:
            joined.append((low, high))
    while len(joined) > limit:
        i = min(range(len(joined) - 1), key=lambda j: (joined[j + 1][0] + 1) / max(joined[j][1] + 1, 1))
        joined[i : i + 2] = [(joined[i][0], joined[i + 1][1])]
    return joined


def _envelopes(whole: set[tuple], timed: set[tuple], limit: int = ENVELOPE_RANGES) -> Envelope:
    """Per unit × metric × basis, at most `limit` value ranges that hold all of its located buckets. One range
    from the lowest to the highest located bucket (p50 to the max) let ~40 % of the samples through."""
    return {key: _joined(ranges, limit) for key, ranges in _spans(whole, timed).items()}


def _within(envelopes: Envelope, units: int) -> Column:
    """Whether a sample lies in one of its unit × metric × basis ranges: a few comparisons against array
    literals, before any bucket or hash is computed (a metric with nothing to look up, like a constant send
    lag, drops out whole)."""
    slots = len(METRICS) * len(BASES)
    width = max((len(ranges) for ranges in envelopes.values()), default=1)
    low: list[list[int | None]] = [[None] * (units * slots) for _ in range(width)]
    high: list[list[int | None]] = [[None] * (units * slots) for _ in range(width)]
    for (unit, metric, basis), ranges in envelopes.items():
        for r, (lo, hi) in enumerate(ranges):
            low[r][unit * slots + metric * len(BASES) + basis] = lo
            high[r][unit * slots + metric * len(BASES) + basis] = hi
    index = (F.col("unit") * F.lit(slots) + F.col("metric") * F.lit(len(BASES)) + F.col("basis")).cast("int") + 1
    value = F.col("value_ns")

    def bound(values: list[int | None]) -> Column:
        return F.try_element_at(literal_array(values, LongType()), index)

    pairs = zip(low, high, strict=True)
    inside = [F.coalesce((value >= bound(lo)) & (value <= bound(hi)), F.lit(False)) for lo, hi in pairs]
    return reduce(lambda a, b: a | b, inside)


def _located_samples(samples: DataFrame, wanted: pd.DataFrame, units: Units) -> DataFrame:
    """The pick pass: the samples in the buckets of `wanted` (locate.unknown), keyed at the levels that located
    them. A join on one hash per kind of level drops every other sample cheaply (samples.key_hash); the few
    rows left are matched exactly."""
    repeats: dict[int, list[int]] = {}
    for row in units.rows:
        repeats.setdefault(row["cell_ix"], []).append(row["unit"])
    whole: set[tuple] = set()
    timed: set[tuple] = set()
    for r in wanted[[*LEVEL_KEYS, "bucket"]].drop_duplicates().itertuples(index=False):
        if r.level == SECOND:
            timed.add((r.g, r.metric, r.basis, r.sec, r.bucket))
        for unit in repeats.get(r.g, []) if r.level <= LEADER else [r.g] if r.level == REPEAT else []:
            whole.add((unit, r.metric, r.basis, r.bucket))
    samples = samples.where(_within(_envelopes(whole, timed), len(units.rows)))
    whole_ddl = "unit long, metric int, basis int, bucket int"
    timed_ddl = "unit long, metric int, basis int, sec long, coarse int"
    spark = units.facts.sparkSession
    near = (
        bucketed(samples)
        .withColumn("coarse", F.shiftright("bucket", SECOND_SHIFT))
        .select("*", key_hash(*WHOLE_KEYS).alias("_hw"), key_hash(*TIMED_KEYS).alias("_ht"))
        .join(F.broadcast(_hash_set(units, whole, WHOLE_KEYS, whole_ddl, "_hw")), "_hw", "left")
        .join(F.broadcast(_hash_set(units, timed, TIMED_KEYS, timed_ddl, "_ht")), "_ht", "left")
        .where((F.col("measure") & F.col("_n_hw").isNotNull()) | F.col("_n_ht").isNotNull())
        .drop("_hw", "_ht", "_n_hw", "_n_ht")
    )
    whole_frame = rows_frame(spark, [(*k, True) for k in sorted(whole)], f"{whole_ddl}, _w boolean")
    timed_frame = rows_frame(spark, [(*k, True) for k in sorted(timed)], f"{timed_ddl}, _t boolean")
    rows = (
        near.join(F.broadcast(whole_frame), list(WHOLE_KEYS), "left")
        .join(F.broadcast(timed_frame), list(TIMED_KEYS), "left")
        .withColumn("cell_ix", units.lookup("cell_ix"))
        .drop("coarse")
    )
    return at_levels(rows, F.col("measure") & F.col("_w").isNotNull(), F.col("_t").isNotNull())


LEVEL_FIELDS = [StructField(k, LongType() if k in ("g", "sec") else IntegerType()) for k in LEVEL_KEYS]
SUMMARY_SCHEMA = summary_schema(LEVEL_FIELDS)


def _summary(samples: DataFrame, whole: pd.DataFrame, timed: pd.DataFrame, units: Units) -> pd.DataFrame:
    """Every level's statistics and percentiles (local data): located in bucket_sums' rows on the driver
    (spark_jobs.locate), the few values not known from them picked from the samples."""
    placed = locate.place(level_frame(whole, timed), LEVEL_KEYS)

    def candidates(rows: pd.DataFrame) -> DataFrame:
        return _located_samples(samples, rows, units)

    return summary_of(placed, LEVEL_FIELDS, candidates, "value_ns", PERCENTILES, wanted_at)


def _local(rows: pd.DataFrame, schema: StructType, columns: Sequence[str]) -> pd.DataFrame:
    return typed(rows, StructType([schema[c] for c in columns]))


def analyze(sent: DataFrame, received: DataFrame, cells: DataFrame) -> Analysis:
    """Run the three passes over raw rows (lakeio.Raw's frames, or any with the raw schemas and run_id,
    cell_id[, repeat]); everything the tables need is in the returned Analysis."""
    units = Units.of(cells)
    sent, received = with_unit(sent, units), with_unit(received, units)
    books = ledger_pass.ledger(sent, received, units)
    group_all = books.dup_word_count > ledger_pass.ROUTE_LIMIT
    spark = units.facts.sparkSession
    with compiled(spark):  # raw rows: receipts of messages received twice (kept at once), samples, bucket sums
        first = first_receipts(received, books.dup_words, group_all)
        samples = sample_rows(sent, first, units)
        sums = bucket_sums(samples)
        rows = sums.toArrow().to_pandas()
    cell_ix = np.array([row["cell_ix"] for row in units.rows], dtype=np.int64)
    rows["cell_ix"] = cell_ix[rows["unit"].to_numpy(np.int64)]
    whole = rows[(rows["kind"] == WHOLE) & (rows["measure"] == True)]  # noqa: E712 (null: not grouped by it)
    timed, done = (rows[rows["kind"] == kind] for kind in (TIMED, DONE))
    schema = sums.schema.add("cell_ix", LongType(), False)
    return Analysis(
        units,
        books,
        _summary(samples, whole, timed, units),
        measured=_local(whole, schema, [*WHOLE_COLUMNS, "cell_ix", *PARTIALS]),
        done=_local(done, schema, [*DONE_COLUMNS, "n"]),
    )
