"""Pure transformations from raw rows to latency samples (no I/O), one row per sample value.

They mirror `bench_tasks.core.analysis` exactly, so the Spark tables and the generator's own result.json agree
on the same data (tests/spark cross-checks them):
- one run of a cell is identified by (run_id, cell_id, repeat): a cell the matrix repeats runs several times
  in a run, each repeat with its own schedule, seqs and phase boundaries (a cell run once is repeat 1). In the
  hot path such a *unit* is a small int (`unit`), and a cell with all its repeats is `cell_ix`;
- a message is identified by (unit, producer_id, seq); its phase is decided by intended time;
- a received message counts once, at its earliest receipt; later receipts are `duplicated` (spark_jobs.ledger
  finds the 64-message words holding any, and only their receipts are grouped per message);
- `e2e` = first receipt − intended (basis `intended`, response time) and − sent (basis `sent`, service
  time), both from the header the consumer read; acknowledged metrics (`publish`: JetStream PubAck or
  Kafka delivery report, `rtt`: the reply) = acked − intended and acked − sent from the sent rows.

Service chains (measurement `chain`, bench_tasks.load.generator's relays): the final consumer's rows (hop 2) carry
the relay's receive and send times. Beside `e2e` (the total), each message's first final receipt yields
`hop1` = relay receipt − intended / − sent and `hop2` = final receipt − relay receipt / − relay send, as
bench_tasks.core.analysis computes them. The relays' own receipts (relayed-r*.parquet) are not read here.

Metrics and bases are small ints in the sample rows (METRICS, BASES) and named again in the tables. One
internal metric rides along: `lag` (sent − intended of every sent message), whose measure-phase p99.9 the gate
checks and whose count per second of sending is the timeline's `sent_per_s`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pandas as pd
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from .lakeio import DELIVERY_COLUMNS, spark_type
from .lakeio import with_delivery as with_delivery_rows
from .localdata import literal_array, rows_frame, typed
from .metrics import E2E, HOP1, HOP2, LAG, PUBLISH, RTT

CELL_KEYS = ("run_id", "cell_id", "repeat")  # one run of a cell (one repeat)
MERGED_KEYS = ("run_id", "cell_id")  # a cell with all its repeats: the distributions merged, never averaged
MESSAGE_KEYS = (*CELL_KEYS, "producer_id", "seq")


def with_repeat(df: DataFrame) -> DataFrame:
    """Rows from before repeats existed (or frames built without the column) are repeat 1."""
    return df if "repeat" in df.columns else df.withColumn("repeat", F.lit(1))


RECEIVED_MEASUREMENTS = "measurement IN ('e2e', 'chain')"  # cells whose consumers' receipts are measured


def _spec(path: str) -> Column:
    return F.get_json_object(F.col("spec_json"), f"$.{path}")


def with_delivery(cells: DataFrame) -> DataFrame:
    """`cells` with what its systems say of their messages (lakeio.DELIVERY_COLUMNS): read_cells gives them; a
    frame built elsewhere (tests) without them is completed on the driver (a cells frame is small)."""
    missing = [name for name in DELIVERY_COLUMNS if name not in cells.columns]
    if not missing:
        return cells
    table = with_delivery_rows(cells.toArrow())
    added = ", ".join(f"`{name}` {spark_type(DELIVERY_COLUMNS[name][0])}" for name in missing)
    return cells.sparkSession.createDataFrame(table, schema=f"{cells.schema.toDDL()}, {added}")


def numbered(cells: DataFrame) -> DataFrame:
    """`cells` with `unit`, a small int per run × cell × repeat in key order (lakeio numbers them as it reads;
    frames built elsewhere, in tests, are numbered here)."""
    cells = with_repeat(cells)
    if "unit" in cells.columns:
        return cells
    keys = sorted(tuple(r) for r in cells.select(*CELL_KEYS).distinct().collect())
    ddl = "run_id string, cell_id string, repeat int, unit long"
    numbers = rows_frame(cells.sparkSession, [(*k, i) for i, k in enumerate(keys)], ddl)
    return cells.join(F.broadcast(numbers), list(CELL_KEYS))


def cell_facts(cells: DataFrame) -> DataFrame:
    """One row per cell (per repeat) with what the jobs need from its spec, typed (the cells table keeps JSON)."""
    cells = with_delivery(with_repeat(cells))
    acked = F.col("acked_metric")
    return cells.select(
        "run_id",
        "run_date",
        "cell_id",
        "repeat",
        *(["unit"] if "unit" in cells.columns else []),
        "series_key",
        "system",
        "version",
        "measurement",
        "label",
        "status",
        "t0_ns",
        "measure_start_ns",
        "measure_end_ns",
        "end_ns",
        acked,
        F.when(acked == "rtt", F.lit(RTT)).when(acked == "publish", F.lit(PUBLISH)).alias("acked_code"),
        F.expr(RECEIVED_MEASUREMENTS).alias("received_measured"),
        F.coalesce("delivery_guaranteed", F.lit(False)).alias("delivery_guaranteed"),
        _spec("workload.rate_per_s").cast("double").alias("rate_per_s"),
        _spec("workload.measure_s").cast("double").alias("measure_s"),
        _spec("workload.producers").cast("int").alias("producers"),
        _spec("workload.max_schedule_lag_ms").cast("double").alias("max_schedule_lag_ms"),
        F.coalesce(_spec("workload.allowed_loss_ratio").cast("double"), F.lit(0.0)).alias("allowed_loss_ratio"),
    )


def local(frame: DataFrame) -> DataFrame:
    """A small frame's rows brought to the driver and handed back as local data: later plans stay small and
    broadcasting it starts no Spark job."""
    return frame.sparkSession.createDataFrame(frame.toArrow(), schema=frame.schema)


@dataclass(frozen=True)
class Units:
    """The units of the cells being analyzed, on the driver: cell_facts, one row per unit (numbered 0..n−1).
    Raw rows look their unit's facts up by index (`lookup`) instead of joining them."""

    facts: DataFrame  # local data
    rows: tuple[Row, ...]  # the same, row i being unit i

    @classmethod
    def of(cls, cells: DataFrame) -> Units:
        """The facts of `cells` (numbered, see `numbered`), with `cell_ix`: the lowest unit of each cell's
        repeats. One small collect (none when `cells` is local data, as lakeio.read_raw gives it)."""
        facts = cell_facts(numbered(cells))
        rows = sorted(facts.collect(), key=lambda r: r["unit"])
        if [r["unit"] for r in rows] != list(range(len(rows))):
            raise ValueError(f"units must be numbered 0..n-1, got {[r['unit'] for r in rows]}")
        first: dict[tuple[str, str], int] = {}
        for row in rows:
            first.setdefault((row["run_id"], row["cell_id"]), row["unit"])
        schema = facts.schema.add("cell_ix", "long", False)
        data = [(*row, first[(row["run_id"], row["cell_id"])]) for row in rows]
        with_ix = rows_frame(facts.sparkSession, data, schema)
        return cls(with_ix, tuple(with_ix.collect()))

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The facts as a pandas frame (row i: unit i), for the tables built on the driver."""
        rows = pd.DataFrame.from_records([tuple(r) for r in self.rows], columns=self.facts.columns)
        return typed(rows, self.facts.schema)

    def lookup(self, column: str) -> Column:
        """The unit's `column` for each row (an array literal indexed by `unit`)."""
        values = literal_array([row[column] for row in self.rows], self.facts.schema[column].dataType)
        return F.try_element_at(values, F.col("unit").cast("int") + 1)

    def in_measure(self, intended: Column) -> Column:
        """Whether a message intended then belongs to its unit's measure phase: the harness's own rule
        (bench_tasks.core.schedule.PhasePlan.phases_of), long comparisons instead of the raw `phase` strings."""
        return (intended >= self.lookup("measure_start_ns")) & (intended < self.lookup("measure_end_ns"))


def with_unit(df: DataFrame, units: Units) -> DataFrame:
    """Raw rows with their `unit` (lakeio adds it as a literal; other frames get it from their keys)."""
    if "unit" in df.columns:
        return df
    return with_repeat(df).join(F.broadcast(units.facts.select(*CELL_KEYS, "unit")), list(CELL_KEYS))


def _with_facts(df: DataFrame, units: Units) -> DataFrame:
    """Rows with the unit facts the samples need, and whether they were intended in the measure phase."""
    names = ("t0_ns", "acked_code", "received_measured")
    measure = units.in_measure(F.col("intended_ns")).alias("measure")
    return df.select("*", *[units.lookup(n).alias(n) for n in names], measure)


WORD_BITS = 6  # a word: 64 consecutive seqs of one producer, one bit each (spark_jobs.ledger)


def word(seq: Column) -> Column:
    """Which word a message's seq falls in."""
    return F.shiftright(seq, WORD_BITS)


def word_bit(seq: Column) -> Column:
    """The message's bit in its word's long."""
    position = seq.bitwiseAND(F.lit((1 << WORD_BITS) - 1)).cast("int")
    return F.call_function("shiftleft", F.lit(1).cast("long"), position)


RECEIPT_FIELDS = ("received_ns", "intended_ns", "sent_ns", "leader", "relay_received_ns", "relay_sent_ns")


def _earliest(received: DataFrame) -> DataFrame:
    grouped = received.groupBy("unit", "producer_id", "seq").agg(F.min(F.struct(*RECEIPT_FIELDS)).alias("f"))
    return grouped.select("unit", "producer_id", "seq", "f.*")


def key_hash(*columns: str) -> Column:
    """A 64-bit hash of key columns: joining on it alone probes a primitive long map (Spark's LongHashedRelation),
    far cheaper per row than a multi-column key or `isin`. A collision only lets an extra row through to an
    exact step after it."""
    return F.xxhash64(*[F.col(c) for c in columns])


def hash_set(frame: DataFrame, name: str, *columns: str) -> DataFrame:
    """The distinct key_hash values of a small frame's rows, as local data in column `name`."""
    return local(frame.select(key_hash(*columns).alias(name)).distinct())


def first_receipts(received: DataFrame, dup_words: DataFrame | None, group_all: bool = False) -> DataFrame:
    """Received rows (with `unit`) reduced to each message's earliest receipt. Only the receipts whose word
    may be in `dup_words` (unit, producer_id, word: the words where some message arrived twice; None: there
    are none) are grouped per message; every other receipt is its message's only one. `group_all` groups
    every receipt (when too many words hold duplicates to route them)."""
    columns = ["unit", "producer_id", "seq", *RECEIPT_FIELDS]
    if group_all:
        return _earliest(received)
    if dup_words is None:
        return received.select(*columns)
    keyed = received.withColumn("_h", F.xxhash64(F.col("unit"), F.col("producer_id"), word(F.col("seq"))))
    dup = F.broadcast(hash_set(dup_words, "_h", "unit", "producer_id", "word"))
    single = keyed.join(dup, "_h", "left_anti").select(*columns)
    # the few grouped messages are kept by the executors: both passes over the samples read them, and only
    # one more scan of the receipts finds them
    return single.unionByName(_earliest(keyed.join(dup, "_h", "left_semi")).localCheckpoint())


SAMPLE_COLUMNS = ("unit", "metric", "basis", "leader", "at_ns", "done_ns", "measure", "value_ns", "t0_ns")


def _indexes(*values: int) -> Column:
    return F.array(*[F.lit(v) for v in values])


def _sent_samples(sent: DataFrame) -> DataFrame:
    """Per sent row: `lag` (basis sent), and where the cell's acknowledgement is measured, acked − intended
    and acked − sent under its metric (publish or rtt)."""
    acked = F.col("acked_ns").isNotNull() & F.col("acked_code").isNotNull()
    rows = sent.select(
        "unit",
        "t0_ns",
        "intended_ns",
        "sent_ns",
        "acked_ns",
        "acked_code",
        "measure",
        F.explode(F.when(acked, _indexes(0, 1, 2)).otherwise(_indexes(0))).alias("i"),
    )
    i = F.col("i")
    start = F.when(i == 2, F.col("sent_ns")).otherwise(F.col("intended_ns"))
    done = F.when(i == 0, F.col("sent_ns")).otherwise(F.col("acked_ns"))
    return rows.select(
        "unit",
        F.when(i == 0, F.lit(LAG)).otherwise(F.col("acked_code")).alias("metric"),
        F.when(i == 1, F.lit(0)).otherwise(F.lit(1)).alias("basis"),
        F.lit(None).cast("int").alias("leader"),
        F.col("intended_ns").alias("at_ns"),
        done.alias("done_ns"),
        "measure",
        (done - start).alias("value_ns"),
        "t0_ns",
    )


def _receipt_samples(first: DataFrame) -> DataFrame:
    """Per first receipt of a measured consumer: e2e from intended and from sent; relayed messages (chains)
    also hop1 (to the relay's receipt) and hop2 (from the relay's receipt / send)."""
    relayed = F.col("relay_received_ns").isNotNull()
    rows = first.where("received_measured").select(
        "*", F.explode(F.when(relayed, _indexes(0, 1, 2, 3, 4, 5)).otherwise(_indexes(0, 1))).alias("i")
    )
    i = F.col("i")
    starts = ("intended_ns", "sent_ns", "intended_ns", "sent_ns", "relay_received_ns", "relay_sent_ns")
    start = F.col(starts[-1])
    for index in range(len(starts) - 2, -1, -1):
        start = F.when(i == index, F.col(starts[index])).otherwise(start)
    done = F.when(i.isin(2, 3), F.col("relay_received_ns")).otherwise(F.col("received_ns"))
    return rows.select(
        "unit",
        F.when(i < 2, F.lit(E2E)).when(i < 4, F.lit(HOP1)).otherwise(F.lit(HOP2)).alias("metric"),
        i.bitwiseAND(F.lit(1)).alias("basis"),
        F.col("leader").cast("int").alias("leader"),
        F.col("intended_ns").alias("at_ns"),
        done.alias("done_ns"),
        "measure",
        (done - start).alias("value_ns"),
        "t0_ns",
    )


def sample_rows(sent: DataFrame, first: DataFrame, units: Units) -> DataFrame:
    """One row per sample value (every phase; `measure` marks the measure phase's): SAMPLE_COLUMNS, with
    metric and basis as codes (METRICS, BASES). `first`: first_receipts of the received rows."""
    samples = _sent_samples(_with_facts(with_unit(sent, units), units)).unionByName(
        _receipt_samples(_with_facts(first, units))
    )
    return samples.where(F.col("value_ns").isNotNull())
