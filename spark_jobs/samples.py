"""Pure transformations from raw rows to latency samples and message accounting (no I/O).

They mirror `bench_tasks.core.analysis` exactly, so the Spark tables and the generator's own result.json agree
on the same data (tests/spark cross-checks them):
- one run of a cell is identified by (run_id, cell_id, repeat): a cell the matrix repeats runs several times
  in a run, each repeat with its own schedule, seqs and phase boundaries (a cell run once is repeat 1);
- a message is identified by (run_id, cell_id, repeat, producer_id, seq); its phase is decided by intended time;
- a received message counts once, at its earliest receipt; later receipts are `duplicated`;
- `e2e` = first receipt − intended (basis `intended`, response time) and − sent (basis `sent`, service
  time), both from the header the consumer read; acknowledged metrics (`publish`: JetStream PubAck or
  Kafka delivery report, `rtt`: the reply) = acked − intended and acked − sent from the sent rows.

Service chains (measurement `chain`, bench_tasks.load.generator's relays): the final consumer's rows (hop 2) carry
the relay's receive and send times. Beside `e2e` (the total), each message's first final receipt yields
`hop1` = relay receipt − intended / − sent and `hop2` = final receipt − relay receipt / − relay send, as
bench_tasks.core.analysis computes them. The relays' own receipts (relayed-r*.parquet) are not read here.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

MEASURE = "measure"
BASES = ("intended", "sent")
CELL_KEYS = ("run_id", "cell_id", "repeat")  # one run of a cell (one repeat)
MERGED_KEYS = ("run_id", "cell_id")  # a cell with all its repeats: the distributions merged, never averaged
MESSAGE_KEYS = (*CELL_KEYS, "producer_id", "seq")


def with_repeat(df: DataFrame) -> DataFrame:
    """Rows from before repeats existed (or frames built without the column) are repeat 1."""
    return df if "repeat" in df.columns else df.withColumn("repeat", F.lit(1))


RECEIVED_MEASUREMENTS = "measurement IN ('e2e', 'chain')"  # cells whose consumers' receipts are measured


def _spec(path: str) -> Column:
    return F.get_json_object(F.col("spec_json"), f"$.{path}")


def acked_metric() -> Column:
    """What an acknowledgement means in a cell, as bench_tasks.cell.runner.acked_metric decides it from the spec:
    an rtt reply, nothing for core NATS publishes, else a publish ack (JetStream PubAck, Kafka report)."""
    return (
        F.when(F.col("measurement") == "rtt", F.lit("rtt"))
        .when((F.col("system") == "nats") & (_spec("broker.mode") == "core"), F.lit(None).cast("string"))
        .otherwise(F.lit("publish"))
    )


def delivery_guaranteed() -> Column:
    """Cells whose acknowledged messages must never be lost: Kafka acks=all (-1) and JetStream."""
    acks = F.lower(_spec("client.producer.acks"))
    kafka = (F.col("system") == "kafka") & acks.isin("all", "-1")
    jetstream = (F.col("system") == "nats") & (_spec("broker.mode") == "jetstream")
    return F.coalesce(kafka | jetstream, F.lit(False))


def cell_facts(cells: DataFrame) -> DataFrame:
    """One row per cell (per repeat) with what the jobs need from its spec, typed (the cells table keeps JSON)."""
    return with_repeat(cells).select(
        "run_id",
        "run_date",
        "cell_id",
        "repeat",
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
        acked_metric().alias("acked_metric"),
        delivery_guaranteed().alias("delivery_guaranteed"),
        _spec("workload.rate_per_s").cast("double").alias("rate_per_s"),
        _spec("workload.measure_s").cast("double").alias("measure_s"),
        _spec("workload.producers").cast("int").alias("producers"),
        _spec("workload.max_schedule_lag_ms").cast("double").alias("max_schedule_lag_ms"),
        F.coalesce(_spec("workload.allowed_loss_ratio").cast("double"), F.lit(0.0)).alias("allowed_loss_ratio"),
    )


def in_phases(df: DataFrame, phases: Sequence[str] | None) -> DataFrame:
    """Rows of the given phases (None: every phase)."""
    return df if phases is None else df.where(F.col("phase").isin(list(phases)))


def receipts(received: DataFrame, phases: Sequence[str] | None = (MEASURE,)) -> DataFrame:
    """Received rows of the measured (final) consumers, labelled with the metric they feed: `e2e`."""
    return in_phases(with_repeat(received), phases).withColumn("metric", F.lit("e2e"))


def first_receipts(labelled: DataFrame) -> DataFrame:
    """Each message once per metric, at its earliest receipt, with how many times it was received."""
    first = F.min(
        F.struct("received_ns", "intended_ns", "sent_ns", "leader", "relay_received_ns", "relay_sent_ns")
    ).alias("first")
    return (
        labelled.groupBy(*MESSAGE_KEYS, "metric")
        .agg(first, F.count(F.lit(1)).alias("receipts"))
        .select(*MESSAGE_KEYS, "metric", "receipts", "first.*")
    )


def chain_hops(first: DataFrame) -> DataFrame:
    """`hop1` and `hop2` samples of relayed messages, from their first final receipt (two rows per basis)."""
    relayed = first.where(F.col("relay_received_ns").isNotNull())
    common = [*CELL_KEYS, "leader", F.col("intended_ns").alias("at_ns")]

    def hop(metric: str, done: str, start: dict[str, str]) -> DataFrame:
        return relayed.select(
            *common,
            F.lit(metric).alias("metric"),
            F.col(done).alias("done_ns"),
            F.array(
                *(
                    F.struct(F.lit(basis).alias("basis"), (F.col(done) - F.col(col)).alias("value_ns"))
                    for basis, col in start.items()
                )
            ).alias("_b"),
        )

    both = hop("hop1", "relay_received_ns", {"intended": "intended_ns", "sent": "sent_ns"}).unionByName(
        hop("hop2", "received_ns", {"intended": "relay_received_ns", "sent": "relay_sent_ns"})
    )
    return both.select(*CELL_KEYS, "metric", "leader", "at_ns", "done_ns", F.explode("_b").alias("b")).select(
        *CELL_KEYS, "metric", "leader", "at_ns", "done_ns", "b.basis", "b.value_ns"
    )


def _bases(df: DataFrame, done: str) -> DataFrame:
    """Two sample rows per message: latency from the intended and from the actual send."""
    common = [*CELL_KEYS, "metric", "leader", F.col("intended_ns").alias("at_ns"), F.col(done).alias("done_ns")]
    by_intended = df.select(
        *common, F.lit("intended").alias("basis"), (F.col(done) - F.col("intended_ns")).alias("value_ns")
    )
    by_sent = df.select(*common, F.lit("sent").alias("basis"), (F.col(done) - F.col("sent_ns")).alias("value_ns"))
    return by_intended.unionByName(by_sent)


def latency_samples(
    sent: DataFrame, received: DataFrame, facts: DataFrame, phases: Sequence[str] | None = (MEASURE,)
) -> DataFrame:
    """Long-format samples: run_id, cell_id, metric, basis, leader, at_ns (intended), done_ns, value_ns.

    `leader` is the partition leader at receipt (Kafka e2e); null where the data has none."""
    e2e = first_receipts(
        receipts(received, phases).join(facts.where(RECEIVED_MEASUREMENTS).select(*CELL_KEYS), list(CELL_KEYS))
    )
    acked = (
        in_phases(with_repeat(sent), phases)
        .where(F.col("acked_ns").isNotNull())
        .join(facts.where(F.col("acked_metric").isNotNull()).select(*CELL_KEYS, "acked_metric"), list(CELL_KEYS))
        .select(*MESSAGE_KEYS, "intended_ns", "sent_ns", "acked_ns", F.col("acked_metric").alias("metric"))
        .withColumn("leader", F.lit(None).cast("int"))
    )
    samples = _bases(e2e, "received_ns").unionByName(_bases(acked, "acked_ns"))
    return samples.unionByName(chain_hops(e2e).select(*samples.columns))


def accounting(sent: DataFrame, received: DataFrame, facts: DataFrame) -> DataFrame:
    """Measure-phase message accounting per cell, as bench_tasks.core.analysis.account counts it.

    Columns: run_id, cell_id, scheduled, sent, send_errors, acknowledged, received, duplicated, lost,
    acknowledged_but_lost."""
    first = first_receipts(receipts(received).where("metric = 'e2e'")).select(*MESSAGE_KEYS, "receipts")
    rows = (
        in_phases(with_repeat(sent), (MEASURE,))
        .join(F.broadcast(facts.select(*CELL_KEYS, "measurement")), list(CELL_KEYS), "right")
        .join(first, list(MESSAGE_KEYS), "left")
    )
    is_sent, is_acked = F.col("sent_ns").isNotNull(), F.col("acked_ns").isNotNull()
    is_got = F.col("receipts").isNotNull()
    counts = rows.groupBy(*CELL_KEYS, "measurement").agg(
        F.count("seq").alias("scheduled"),
        F.count("sent_ns").alias("sent"),
        F.count("acked_ns").alias("acknowledged"),
        F.sum(F.when(is_got, 1).otherwise(0)).alias("_got"),
        F.sum(F.when(is_sent & ~is_got, 1).otherwise(0)).alias("_sent_not_got"),
        F.sum(F.when(is_acked & ~is_got, 1).otherwise(0)).alias("_acked_not_got"),
    )
    dupes = first.groupBy(*CELL_KEYS).agg(F.sum(F.col("receipts") - 1).alias("_dupes"))
    e2e = F.col("measurement").isin("e2e", "chain")
    return counts.join(dupes, list(CELL_KEYS), "left").select(
        *CELL_KEYS,
        F.col("scheduled").cast("long"),
        F.col("sent").cast("long"),
        (F.col("scheduled") - F.col("sent")).cast("long").alias("send_errors"),
        F.col("acknowledged").cast("long"),
        F.when(e2e, F.col("_got")).otherwise(0).cast("long").alias("received"),
        F.when(e2e, F.coalesce(F.col("_dupes"), F.lit(0))).otherwise(0).cast("long").alias("duplicated"),
        F.when(e2e, F.col("_sent_not_got")).otherwise(F.col("sent") - F.col("acknowledged")).cast("long").alias("lost"),
        F.when(e2e, F.col("_acked_not_got")).otherwise(0).cast("long").alias("acknowledged_but_lost"),
    )
