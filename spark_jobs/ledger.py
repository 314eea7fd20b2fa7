"""Message accounting without joining messages: one narrow pass over the raw keys, 64 messages to a word.

Every sent and received row sets its message's bit (spark_jobs.samples.word_bit) in a long per
unit × producer × word of 64 consecutive seqs, under a few conditions (scheduled in measure, sent, acked;
received in measure; any phase), with row counts beside. Set operations on those words then count exactly
what a join of sent and received rows would: received = |scheduled ∩ received|, lost = |sent \\ received|,
acknowledged-but-lost = |acked \\ received|, duplicated = receipts − |received|. Words whose receipts
outnumber their bits hold a message received twice; only their receipts are grouped per message later
(samples.first_receipts). The aggregation never holds more than a long per 64 messages, and its partial
results, not the rows, are shuffled.

The same pass gathers what the gate checks of each producer (gate_frames.raw_producers_frame): its row count,
seq range, duplicated seqs, missing keys and the lowest latency of each kind. It ends in one row per producer,
which the driver keeps; per-unit accounting is summed from there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.codegen import compiled
from spark_jobs.samples import CELL_KEYS, Units, word, word_bit

WORD_KEYS = ("unit", "producer_id", "word")
LATENCY_MINIMA = ("min_lag_ns", "min_e2e_intended_ns", "min_e2e_sent_ns", "min_ack_intended_ns", "min_ack_sent_ns")


def _bits(condition: Column) -> Column:
    return F.bit_or(F.when(condition, word_bit(F.col("seq"))).otherwise(F.lit(0).cast("long")))


def _pop(bits: Column) -> Column:
    return F.coalesce(F.bit_count(bits), F.lit(0)).cast("long")


def sent_words(sent: DataFrame, units: Units) -> DataFrame:
    """Per unit × producer × word of the sent rows (with `unit`): counts, bits and the gate's minima."""
    measure, has_seq = units.in_measure(F.col("intended_ns")), F.col("seq").isNotNull()
    return sent.groupBy("unit", "producer_id", word(F.col("seq")).alias("word")).agg(
        F.count(F.lit(1)).alias("rows"),
        F.count("seq").alias("seq_rows"),
        _bits(has_seq).alias("all_bits"),
        F.count_if(measure & has_seq).alias("scheduled"),
        _bits(measure).alias("scheduled_bits"),
        F.count_if(measure & F.col("sent_ns").isNotNull()).alias("sent"),
        _bits(measure & F.col("sent_ns").isNotNull()).alias("sent_bits"),
        F.count_if(measure & F.col("acked_ns").isNotNull()).alias("acknowledged"),
        _bits(measure & F.col("acked_ns").isNotNull()).alias("acked_bits"),
        F.min("seq").alias("min_seq"),
        F.max("seq").alias("max_seq"),
        F.count_if(F.col("intended_ns").isNull()).alias("null_intended"),
        F.count_if(F.col("phase").isNull()).alias("null_phase"),
        F.min(F.col("sent_ns") - F.col("intended_ns")).alias("min_lag_ns"),
        F.min(F.col("acked_ns") - F.col("intended_ns")).alias("min_ack_intended_ns"),
        F.min(F.col("acked_ns") - F.col("sent_ns")).alias("min_ack_sent_ns"),
    )


def received_words(received: DataFrame, units: Units) -> DataFrame:
    """Per unit × producer × word of the received rows (with `unit`): receipts, bits, lowest e2e latencies."""
    measure, has_seq = units.in_measure(F.col("intended_ns")), F.col("seq").isNotNull()
    return received.groupBy("unit", "producer_id", word(F.col("seq")).alias("word")).agg(
        F.count_if(has_seq).alias("receipts"),
        _bits(has_seq).alias("received_bits"),
        F.count_if(measure & has_seq).alias("measure_receipts"),
        _bits(measure).alias("measure_bits"),
        F.min(F.col("received_ns") - F.col("intended_ns")).alias("min_e2e_intended_ns"),
        F.min(F.col("received_ns") - F.col("sent_ns")).alias("min_e2e_sent_ns"),
    )


def words(sent: DataFrame, received: DataFrame, units: Units) -> DataFrame:
    """Both sides per word, with the set counts the accounting needs (nulls where a side has no rows)."""
    both = sent_words(sent, units).join(received_words(received, units), list(WORD_KEYS), "full")
    got = F.col("measure_bits")
    return both.select(
        "*",
        _pop(F.col("scheduled_bits").bitwiseAND(got)).alias("got"),
        _pop(F.col("sent_bits").bitwiseAND(F.bitwise_not(F.coalesce(got, F.lit(0).cast("long"))))).alias("sent_lost"),
        _pop(F.col("acked_bits").bitwiseAND(F.bitwise_not(F.coalesce(got, F.lit(0).cast("long"))))).alias("acked_lost"),
        (F.coalesce(F.col("measure_receipts"), F.lit(0)) - _pop(got)).alias("dupes"),
        (F.coalesce(F.col("receipts"), F.lit(0)) > _pop(F.col("received_bits"))).alias("has_duplicate"),
        (F.coalesce(F.col("seq_rows"), F.lit(0)) - _pop(F.col("all_bits"))).alias("duplicate_seqs"),
    )


def _sum(column: str) -> Column:
    return F.coalesce(F.sum(column), F.lit(0)).cast("long")


COUNTS = ("scheduled", "sent", "acknowledged", "got", "sent_lost", "acked_lost", "dupes")
ACCOUNTING_COLUMNS = (  # the accounting table's counts, in table order
    "scheduled",
    "sent",
    "send_errors",
    "acknowledged",
    "received",
    "duplicated",
    "lost",
    "acknowledged_but_lost",
)


def per_producer(table: DataFrame) -> DataFrame:
    """The word table summed per unit × producer: the accounting's counts and the gate's checks."""
    return table.groupBy("unit", "producer_id").agg(
        *[_sum(c).alias(c) for c in COUNTS],
        _sum("rows").alias("producer_rows"),
        _sum("duplicate_seqs").alias("duplicate_seqs"),
        F.min("min_seq").alias("min_seq"),
        F.max("max_seq").alias("max_seq"),
        (_sum("rows") - _sum("seq_rows")).alias("null_seq"),
        _sum("null_intended").alias("null_intended"),
        _sum("null_phase").alias("null_phase"),
        *[F.min(c).alias(c) for c in LATENCY_MINIMA],
    )


def unit_accounting(producers: pd.DataFrame, units: Units) -> pd.DataFrame:
    """Measure-phase message accounting per unit, as bench_tasks.core.analysis.account counts it, summed on the
    driver from the per-producer rows (every unit, also one without rows). Columns: CELL_KEYS, unit,
    ACCOUNTING_COLUMNS (longs)."""
    facts = units.frame
    totals = producers.groupby("unit")[list(COUNTS)].sum().reindex(facts["unit"], fill_value=0)
    t = {name: totals[name].to_numpy(np.int64) for name in COUNTS}
    e2e = facts["measurement"].isin(("e2e", "chain")).to_numpy()
    zero = np.zeros(len(facts), dtype=np.int64)
    counts = {
        "scheduled": t["scheduled"],
        "sent": t["sent"],
        "send_errors": t["scheduled"] - t["sent"],
        "acknowledged": t["acknowledged"],
        "received": np.where(e2e, t["got"], zero),
        "duplicated": np.where(e2e, t["dupes"], zero),
        "lost": np.where(e2e, t["sent_lost"], t["sent"] - t["acknowledged"]),
        "acknowledged_but_lost": np.where(e2e, t["acked_lost"], zero),
    }
    return facts[[*CELL_KEYS, "unit"]].assign(**counts).reset_index(drop=True)


CHECK_COLUMNS = (
    *CELL_KEYS,
    "unit",
    "producer_id",
    *COUNTS,
    "producer_rows",
    "duplicate_seqs",
    "min_seq",
    "max_seq",
    "null_seq",
    "null_intended",
    "null_phase",
    *LATENCY_MINIMA,
)
ACKED_MINIMA = ("min_ack_intended_ns", "min_ack_sent_ns")


def producer_checks(producers: pd.DataFrame, units: Units) -> pd.DataFrame:
    """Per unit × producer: rows, seq range, duplicated seqs, missing keys and the lowest latencies (acked
    latencies only where the cell measures its acknowledgements), beside the accounting's counts."""
    rows = producers.merge(units.frame[[*CELL_KEYS, "unit", "acked_metric"]], on="unit")
    acked = rows["acked_metric"].notna()
    return rows.assign(**{c: rows[c].where(acked) for c in ACKED_MINIMA})[list(CHECK_COLUMNS)]


ROUTE_LIMIT = 100_000  # words with a duplicate that are still routed (broadcast); beyond, every receipt is grouped


@dataclass
class Ledger:
    """The pass's results, on the driver: per-unit accounting, per-producer checks, and the words holding a
    message received twice (`dup_words`: unit, producer_id, word; None when there are none)."""

    accounting: pd.DataFrame  # unit_accounting
    producers: pd.DataFrame  # producer_checks
    dup_words: DataFrame | None
    dup_word_count: int


def ledger(sent: DataFrame, received: DataFrame, units: Units) -> Ledger:
    """Run the pass over sent and received rows (with `unit`). The word table (a row per 64 messages) is held
    by the executors while the per-producer sums and the words with a duplicate come to the driver."""
    with compiled(sent.sparkSession):  # the word table has a row per 64 messages: millions at a sweep's scale
        table = words(sent, received, units).localCheckpoint()
        checks = producer_checks(per_producer(table).toArrow().to_pandas(), units)
        dup_frame = table.where("has_duplicate").select(*WORD_KEYS)
        dup_rows = dup_frame.toArrow()  # counted on the driver: no count() job
    dup = table.sparkSession.createDataFrame(dup_rows, schema=dup_frame.schema)
    count = dup_rows.num_rows
    return Ledger(unit_accounting(checks, units), checks, dup if count else None, count)
