"""Every statistic of a run's tables in three passes over its raw Parquet, none of which sorts a group whole.

1. **Ledger** (spark_jobs.ledger): the keys of every sent and received row, 64 messages to a word — the
   message accounting, the gate's per-producer checks, and where any message arrived twice.
2. **Buckets**: every sample value (samples.sample_rows: e2e, publish/rtt, hops, and the send lag) counted per
   unit × metric × basis × leader × second of its intended time × seconds until done × phase × log bucket
   (exact.log_bucket). Every table's counts, minima, maxima, means, deviations, the timeline's per-second
   counts of completions and sends, and the histogram are sums over this one small table.
3. **Pick**: the ranks of every percentile of every group are located in that table (exact.place / ranks),
   and a second read of the samples keeps only the rows of the located buckets (about 1 %), ranks them and
   picks the exact values (exact.pick).

The groups live at four levels (LEVELS) of one key (LEVEL_KEYS), so one window and one pick serve them all.
Between the passes only small tables are kept: on the driver as local data (units, per-producer ledger,
located ranks, the summary), or by the executors (the bucket table, the earliest receipts of the few messages
received twice). The raw Parquet (4 bytes a message) is read again rather than cached: Spark's cache of the
samples would be ten times larger and spill with a 1 GiB driver. Plans are built so that each pass reads it once
(one generator per row, no union of the same source).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import LongType

from bench_tasks import PERCENTILES
from spark_jobs import ledger as ledger_pass
from spark_jobs.exact import bucket_bounds, finish, group_stats, log_bucket, partials, pick, place, ranks, unknown
from spark_jobs.localdata import literal_array, rows_frame
from spark_jobs.samples import BASES, LAG, METRICS, Units, first_receipts, key_hash, local, sample_rows, with_unit

NS_PER_S = 1_000_000_000
MERGED, LEADER, REPEAT, SECOND = range(4)
LEVELS = {
    MERGED: "a cell over all its repeats (measure phase): the percentile table's overall rows",
    LEADER: "a cell × partition leader (measure phase, receipts that carry one): its per-leader rows",
    REPEAT: "one repeat of a cell (measure phase): percentiles_by_repeat, and the send lag the gate checks",
    SECOND: "one repeat × second of intended time (every phase): the timeline",
}
LEVEL_KEYS = ("level", "g", "metric", "basis", "leader", "sec")  # g: cell_ix (MERGED, LEADER) or unit
BUCKET_KEYS = ("unit", "metric", "basis", "leader", "sec", "delta", "measure", "bucket")
TIMELINE_PERCENTILES = ("50", "99")
SECOND_SHIFT = 2  # the per-second level counts coarser buckets (bucket >> 2: 32 a doubling), a smaller table
LAG_PERCENTILE = "99.9"


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


def _wanted(percentile: str) -> Column:
    """Which levels state which percentiles: all at the cell and repeat levels (the lag only its p99.9), p50
    and p99 per second."""
    level, lag = F.col("level"), F.col("metric") == LAG
    wanted = F.lit(False)
    if percentile in PERCENTILES:
        wanted = wanted | (level <= LEADER) | ((level == REPEAT) & ~lag)
    if percentile == LAG_PERCENTILE:
        wanted = wanted | ((level == REPEAT) & lag)
    if percentile in TIMELINE_PERCENTILES:
        wanted = wanted | (level == SECOND)
    return wanted


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


def _summed(rows: DataFrame, *keys: str | Column) -> DataFrame:
    """Bucket partials summed over every key but `keys`."""
    return rows.groupBy(*keys).agg(
        F.sum("n").alias("n"),
        F.min("vmin").alias("vmin"),
        F.max("vmax").alias("vmax"),
        F.sum("vsum").alias("vsum"),
        F.sum("vsq").alias("vsq"),
    )


def level_rows(buckets: DataFrame) -> DataFrame:
    """The bucket table (with cell_ix) at every level (at_levels), summed first to what the levels read: the
    measure-phase rows over their seconds, every row over its leader, phase and delay at its coarse bucket per
    second. A few rows per group × bucket instead of one per second × delay × phase of it: the explode and the
    window that follow (exact.place) handle a fraction of the bucket table."""
    whole = _summed(buckets.where("measure"), "unit", "cell_ix", "metric", "basis", "leader", "bucket")
    coarse = F.shiftleft(F.shiftright("bucket", SECOND_SHIFT), SECOND_SHIFT).alias("bucket")
    timed = _summed(buckets, "unit", "cell_ix", "metric", "basis", "sec", coarse)
    none = F.lit(None)
    rows = whole.select("*", none.cast("long").alias("sec"), F.lit(True).alias("measure"), F.lit(False).alias("_t"))
    rows = rows.unionByName(
        timed.select("*", none.cast("int").alias("leader"), F.lit(False).alias("measure"), F.lit(True).alias("_t"))
    )
    return at_levels(rows, F.col("measure"), F.col("_t"))


@dataclass
class Analysis:
    """The small results every table is assembled from: on the driver (local data) or, for the bucket table,
    materialized by the executors (localCheckpoint, freed when the last reference goes)."""

    units: Units
    ledger: ledger_pass.Ledger
    summary: DataFrame  # LEVEL_KEYS, count, min_ns, max_ns, mean_ns, stddev_ns, p…_ns, unsupported
    buckets: DataFrame  # the bucket table (BUCKET_KEYS + PARTIALS) with cell_ix

    @property
    def facts(self) -> DataFrame:
        return self.units.facts


WHOLE_KEYS = ("unit", "metric", "basis", "bucket")  # a located bucket of a measure-phase level, per unit
TIMED_KEYS = ("unit", "metric", "basis", "sec", "coarse")  # … of the per-second level (coarse bucket)


def _hash_set(units: Units, keys: set[tuple], columns: tuple[str, ...], ddl: str, name: str) -> DataFrame:
    """Local data: the distinct samples.key_hash values of `keys` (tuples of `columns`), in column `name`,
    flagged `_n<name>`. Hashed by Spark (a projection of local data: no job) so they match the samples'."""
    spark = units.facts.sparkSession
    frame = rows_frame(spark, sorted(keys), ddl)
    values = sorted({row[0] for row in frame.select(key_hash(*columns)).collect()})
    return rows_frame(spark, [(v, True) for v in values], f"{name} long, _n{name} boolean")


Envelope = dict[tuple[int, int, int], tuple[int, int]]  # (unit, metric, basis) -> lowest, highest value wanted


def _envelopes(whole: set[tuple], timed: set[tuple]) -> Envelope:
    """Per unit × metric × basis, the value range spanning its located buckets (exact.bucket_bounds)."""
    out: Envelope = {}
    spans = [(k[:3], bucket_bounds(k[3])) for k in whole]
    for key in timed:  # a coarse bucket spans 2^SECOND_SHIFT fine ones
        low, high = key[4] << SECOND_SHIFT, (key[4] << SECOND_SHIFT) + (1 << SECOND_SHIFT) - 1
        spans.append((key[:3], (bucket_bounds(low)[0], bucket_bounds(high)[1])))
    for key, (low, high) in spans:
        known = out.get(key, (low, high))
        out[key] = (min(known[0], low), max(known[1], high))
    return out


def _within(envelopes: Envelope, units: int) -> Column:
    """Whether a sample lies in its unit × metric × basis envelope: two comparisons against array literals,
    before any bucket or hash is computed (a metric with nothing to look up, like a constant send lag, drops
    out whole)."""
    slots = len(METRICS) * len(BASES)
    low: list[int | None] = [None] * (units * slots)
    high: list[int | None] = [None] * (units * slots)
    for (unit, metric, basis), (lo, hi) in envelopes.items():
        low[unit * slots + metric * len(BASES) + basis], high[unit * slots + metric * len(BASES) + basis] = lo, hi
    index = (F.col("unit") * F.lit(slots) + F.col("metric") * F.lit(len(BASES)) + F.col("basis")).cast("int") + 1
    value = F.col("value_ns")

    def bound(values: list[int | None]) -> Column:
        return F.try_element_at(literal_array(values, LongType()), index)

    return F.coalesce((value >= bound(low)) & (value <= bound(high)), F.lit(False))


def _located_samples(samples: DataFrame, located: DataFrame, units: Units) -> DataFrame:
    """The pick pass: the samples in a located bucket whose value is not known yet, keyed at the levels that
    located them. A join on one hash per kind of level drops every other sample cheaply (samples.key_hash);
    the few rows left are matched exactly."""
    repeats: dict[int, list[int]] = {}
    for row in units.rows:
        repeats.setdefault(row["cell_ix"], []).append(row["unit"])
    whole: set[tuple] = set()
    timed: set[tuple] = set()
    for r in unknown(located).collect():
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


def analyze(sent: DataFrame, received: DataFrame, cells: DataFrame) -> Analysis:
    """Run the three passes over raw rows (lakeio.Raw's frames, or any with the raw schemas and run_id,
    cell_id[, repeat]); everything the tables need is in the returned Analysis."""
    units = Units.of(cells)
    sent, received = with_unit(sent, units), with_unit(received, units)
    books = ledger_pass.ledger(sent, received, units)
    group_all = books.dup_word_count > ledger_pass.ROUTE_LIMIT
    samples = sample_rows(sent, first_receipts(received, books.dup_words, group_all), units)
    buckets = bucket_table(samples).withColumn("cell_ix", units.lookup("cell_ix")).localCheckpoint()
    placed = place(level_rows(buckets), LEVEL_KEYS).localCheckpoint()
    located = local(ranks(placed, LEVEL_KEYS, PERCENTILES, _wanted))
    picked = pick(_located_samples(samples, located, units), located, LEVEL_KEYS, "value_ns")
    summary = local(finish(group_stats(placed, LEVEL_KEYS), picked, LEVEL_KEYS, PERCENTILES))
    return Analysis(units, books, summary, buckets)
