"""Pure transformations from raw rows to latency samples and message accounting (no I/O).

They mirror `bench_tasks.analysis` exactly, so the Spark tables and the generator's own result.json agree
on the same data (tests/spark cross-checks them):
- a message is identified by (run_id, cell_id, producer_id, seq); its phase is decided by intended time;
- a received message counts once, at its earliest receipt; later receipts are `duplicated`;
- `e2e` = first receipt − intended (basis `intended`, response time) and − sent (basis `sent`, service
  time), both from the header the consumer read; acknowledged metrics (`publish`: JetStream PubAck or
  Kafka delivery report, `rtt`: the reply) = acked − intended and acked − sent from the sent rows.

Service chains (data-driven): received rows carry a `hop`. When a cell's rows hold more than one hop value,
each value h also yields a metric `hop<h>` from the rows of that hop (latency to reaching hop h, on the
same two bases as recorded in those rows), and `e2e` and the message accounting use the highest hop (the
end of the chain). A cell whose rows are all hop 0 — every cell today — gets `e2e` only.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

MEASURE = "measure"
BASES = ("intended", "sent")
CELL_KEYS = ("run_id", "cell_id")
MESSAGE_KEYS = (*CELL_KEYS, "producer_id", "seq")


def _spec(path: str) -> Column:
    return F.get_json_object(F.col("spec_json"), f"$.{path}")


def acked_metric() -> Column:
    """What an acknowledgement means in a cell, as bench_tasks.runner.acked_metric decides it from the spec:
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
    """One row per cell with what the jobs need from its spec, typed (the cells table keeps JSON)."""
    return cells.select(
        "run_id",
        "run_date",
        "cell_id",
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
    )


def in_phases(df: DataFrame, phases: Sequence[str] | None) -> DataFrame:
    """Rows of the given phases (None: every phase)."""
    return df if phases is None else df.where(F.col("phase").isin(list(phases)))


def receipts(received: DataFrame, phases: Sequence[str] | None = (MEASURE,)) -> DataFrame:
    """Received rows labelled with the metric they feed (`e2e`, and `hop<h>` for service chains)."""
    rows = in_phases(received, phases).withColumn("hop", F.coalesce(F.col("hop").cast("int"), F.lit(0)))
    cell = Window.partitionBy(*CELL_KEYS)
    rows = rows.withColumn("_top", F.max("hop").over(cell)).withColumn(
        "_chain", F.min("hop").over(cell) < F.col("_top")
    )
    final = rows.where(F.col("hop") == F.col("_top")).withColumn("metric", F.lit("e2e"))
    hops = rows.where("_chain").withColumn("metric", F.concat(F.lit("hop"), F.col("hop").cast("string")))
    return final.unionByName(hops).drop("_top", "_chain")


def first_receipts(labelled: DataFrame) -> DataFrame:
    """Each message once per metric, at its earliest receipt, with how many times it was received."""
    first = F.min(F.struct("received_ns", "intended_ns", "sent_ns", "leader")).alias("first")
    return (
        labelled.groupBy(*MESSAGE_KEYS, "metric")
        .agg(first, F.count(F.lit(1)).alias("receipts"))
        .select(*MESSAGE_KEYS, "metric", "receipts", "first.*")
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
        receipts(received, phases).join(facts.where("measurement = 'e2e'").select(*CELL_KEYS), list(CELL_KEYS))
    )
    acked = (
        in_phases(sent, phases)
        .where(F.col("acked_ns").isNotNull())
        .join(facts.where(F.col("acked_metric").isNotNull()).select(*CELL_KEYS, "acked_metric"), list(CELL_KEYS))
        .select(*MESSAGE_KEYS, "intended_ns", "sent_ns", "acked_ns", F.col("acked_metric").alias("metric"))
        .withColumn("leader", F.lit(None).cast("int"))
    )
    return _bases(e2e, "received_ns").unionByName(_bases(acked, "acked_ns"))


def accounting(sent: DataFrame, received: DataFrame, facts: DataFrame) -> DataFrame:
    """Measure-phase message accounting per cell, as bench_tasks.analysis.account counts it.

    Columns: run_id, cell_id, scheduled, sent, send_errors, acknowledged, received, duplicated, lost,
    acknowledged_but_lost."""
    first = first_receipts(receipts(received).where("metric = 'e2e'")).select(*MESSAGE_KEYS, "receipts")
    rows = (
        in_phases(sent, (MEASURE,))
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
    e2e = F.col("measurement") == "e2e"
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
