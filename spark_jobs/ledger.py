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

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_jobs.samples import CELL_KEYS, MEASURE, Units, local, word, word_bit

WORD_KEYS = ("unit", "producer_id", "word")
LATENCY_MINIMA = ("min_lag_ns", "min_e2e_intended_ns", "min_e2e_sent_ns", "min_ack_intended_ns", "min_ack_sent_ns")


def _bits(condition: Column) -> Column:
    return F.bit_or(F.when(condition, word_bit(F.col("seq"))).otherwise(F.lit(0).cast("long")))


def _pop(bits: Column) -> Column:
    return F.coalesce(F.bit_count(bits), F.lit(0)).cast("long")


def sent_words(sent: DataFrame) -> DataFrame:
    """Per unit × producer × word of the sent rows (with `unit`): counts, bits and the gate's minima."""
    measure, has_seq = F.col("phase") == MEASURE, F.col("seq").isNotNull()
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


def received_words(received: DataFrame) -> DataFrame:
    """Per unit × producer × word of the received rows (with `unit`): receipts, bits, lowest e2e latencies."""
    measure, has_seq = F.col("phase") == MEASURE, F.col("seq").isNotNull()
    return received.groupBy("unit", "producer_id", word(F.col("seq")).alias("word")).agg(
        F.count_if(has_seq).alias("receipts"),
        _bits(has_seq).alias("received_bits"),
        F.count_if(measure & has_seq).alias("measure_receipts"),
        _bits(measure).alias("measure_bits"),
        F.min(F.col("received_ns") - F.col("intended_ns")).alias("min_e2e_intended_ns"),
        F.min(F.col("received_ns") - F.col("sent_ns")).alias("min_e2e_sent_ns"),
    )


def words(sent: DataFrame, received: DataFrame) -> DataFrame:
    """Both sides per word, with the set counts the accounting needs (nulls where a side has no rows)."""
    both = sent_words(sent).join(received_words(received), list(WORD_KEYS), "full")
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


def per_producer(table: DataFrame) -> DataFrame:
    """The word table summed per unit × producer: the accounting's counts, the gate's checks, and the words
    that hold a message received twice (a list of word numbers, usually empty)."""
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
        F.collect_list(F.when(F.col("has_duplicate"), F.col("word"))).alias("dup_words"),
    )


def unit_accounting(producers: DataFrame, facts: DataFrame) -> DataFrame:
    """Measure-phase message accounting per unit, as bench_tasks.analysis.account counts it (every unit of
    `facts`, also one without rows). Columns: CELL_KEYS, unit, scheduled, sent, send_errors, acknowledged,
    received, duplicated, lost, acknowledged_but_lost."""
    counts = producers.groupBy("unit").agg(*[_sum(c).alias(c) for c in COUNTS])
    rows = facts.select(*CELL_KEYS, "unit", "measurement").join(counts, "unit", "left").fillna(0, list(COUNTS))
    e2e = F.col("measurement").isin("e2e", "chain")
    return rows.select(
        *CELL_KEYS,
        "unit",
        "scheduled",
        "sent",
        (F.col("scheduled") - F.col("sent")).alias("send_errors"),
        "acknowledged",
        F.when(e2e, F.col("got")).otherwise(0).cast("long").alias("received"),
        F.when(e2e, F.col("dupes")).otherwise(0).cast("long").alias("duplicated"),
        F.when(e2e, F.col("sent_lost")).otherwise(F.col("sent") - F.col("acknowledged")).cast("long").alias("lost"),
        F.when(e2e, F.col("acked_lost")).otherwise(0).cast("long").alias("acknowledged_but_lost"),
    )


def producer_checks(producers: DataFrame, facts: DataFrame) -> DataFrame:
    """Per unit × producer: rows, seq range, duplicated seqs, missing keys and the lowest latencies (acked
    latencies only where the cell measures its acknowledgements)."""
    acked = F.col("acked_metric").isNotNull()
    rows = producers.join(F.broadcast(facts.select(*CELL_KEYS, "unit", "acked_metric")), "unit")
    return rows.select(
        *CELL_KEYS,
        "producer_id",
        "producer_rows",
        "duplicate_seqs",
        "min_seq",
        "max_seq",
        "null_seq",
        "null_intended",
        "null_phase",
        "min_lag_ns",
        "min_e2e_intended_ns",
        "min_e2e_sent_ns",
        F.when(acked, F.col("min_ack_intended_ns")).alias("min_ack_intended_ns"),
        F.when(acked, F.col("min_ack_sent_ns")).alias("min_ack_sent_ns"),
    )


ROUTE_LIMIT = 100_000  # words with a duplicate that are still routed (broadcast); beyond, every receipt is grouped


@dataclass
class Ledger:
    """The pass's results, on the driver: per-unit accounting, per-producer checks, and the words holding a
    message received twice (`dup_words`: unit, producer_id, word; None when there are none)."""

    accounting: DataFrame
    producers: DataFrame
    dup_words: DataFrame | None
    dup_word_count: int


def ledger(sent: DataFrame, received: DataFrame, units: Units) -> Ledger:
    """Run the pass over sent and received rows (with `unit`): one Spark job, whose per-producer result is
    small and kept on the driver."""
    summed = local(per_producer(words(sent, received)))
    spark = summed.sparkSession
    dup_rows = [
        (r.unit, r.producer_id, w)
        for r in summed.select("unit", "producer_id", "dup_words").collect()
        for w in r.dup_words
    ]
    dup = spark.createDataFrame(dup_rows, "unit long, producer_id int, word long") if dup_rows else None
    checks = local(producer_checks(summed.drop("dup_words"), units.facts))
    return Ledger(local(unit_accounting(summed, units.facts)), checks, dup, len(dup_rows))
