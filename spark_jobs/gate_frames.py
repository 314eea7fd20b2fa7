"""The frames the Great Expectations gate validates, built in Spark from the raw data and the tables.

GX then only compares columns with bounds (expectations/): per-cell aggregates and the schedule-lag
quantile are computed here, exactly (spark_jobs.exact), not by GX.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from bench_tasks import PERCENTILES
from spark_jobs.exact import percentile_column, summarize
from spark_jobs.percentiles import ACCOUNTING_COLUMNS
from spark_jobs.samples import CELL_KEYS, MEASURE, MERGED_KEYS, MESSAGE_KEYS, first_receipts, receipts, with_repeat

LAG_PERCENTILE = "99.9"


def raw_samples_frame(sent: DataFrame, received: DataFrame, facts: DataFrame) -> DataFrame:
    """One row per scheduled message (every phase) with its first end-of-chain receipt and its latencies."""
    got = first_receipts(receipts(received, None).where("metric = 'e2e'")).select(
        *MESSAGE_KEYS,
        F.col("received_ns"),
        F.col("intended_ns").alias("r_intended_ns"),
        F.col("sent_ns").alias("r_sent_ns"),
    )
    producer = Window.partitionBy(*CELL_KEYS, "producer_id")
    rows = (
        with_repeat(sent)
        .join(facts.select(*CELL_KEYS, "acked_metric"), list(CELL_KEYS), "left")
        .join(got, list(MESSAGE_KEYS), "left")
    )
    acked = F.col("acked_metric").isNotNull()
    return rows.select(
        *CELL_KEYS,
        "producer_id",
        "seq",
        "intended_ns",
        "phase",
        (F.col("sent_ns") - F.col("intended_ns")).alias("lag_ns"),
        (F.col("received_ns") - F.col("r_intended_ns")).alias("e2e_intended_ns"),
        (F.col("received_ns") - F.col("r_sent_ns")).alias("e2e_sent_ns"),
        F.when(acked, F.col("acked_ns") - F.col("intended_ns")).alias("ack_intended_ns"),
        F.when(acked, F.col("acked_ns") - F.col("sent_ns")).alias("ack_sent_ns"),
        F.count(F.lit(1)).over(producer).alias("producer_rows"),
    )


def raw_cells_frame(sent: DataFrame, accounting: DataFrame, facts: DataFrame) -> DataFrame:
    """One row per cell: measure-phase sends over rate × measure seconds, send-lag p99.9 (the max when too
    few samples support it, as the harness's own gate does) over the cell's limit (null for rtt), loss."""
    done = with_repeat(sent).where((F.col("phase") == MEASURE) & F.col("sent_ns").isNotNull())
    lag = summarize(
        done.withColumn("lag_ns", F.col("sent_ns") - F.col("intended_ns")), list(CELL_KEYS), "lag_ns", (LAG_PERCENTILE,)
    )
    lag_ns = F.coalesce(F.col(percentile_column(LAG_PERCENTILE)), F.col("max_ns"))
    limit_ns = F.col("max_schedule_lag_ms") * F.lit(1e6)
    rows = facts.join(accounting, list(CELL_KEYS), "left").join(
        lag.select(*CELL_KEYS, lag_ns.alias("lag_gate_ns")), list(CELL_KEYS), "left"
    )
    return rows.select(
        *CELL_KEYS,
        "measurement",
        F.col("sent").alias("measure_sent"),
        (F.col("sent") / (F.col("rate_per_s") * F.col("measure_s"))).alias("measure_ratio"),
        "lag_gate_ns",
        F.when(F.col("measurement") != "rtt", F.col("lag_gate_ns") / limit_ns).alias("lag_over_limit"),
        "lost",
        F.when(F.col("delivery_guaranteed"), F.col("lost")).otherwise(F.lit(0)).alias("lost_guaranteed"),
        F.when(F.col("sent") > 0, F.col("lost") / F.col("sent")).otherwise(F.lit(0.0)).alias("loss_ratio"),
        # how far the loss goes past what the cell's matrix allows (workload.allowed_loss_ratio); <= 0 passes
        (
            F.when(F.col("sent") > 0, F.col("lost") / F.col("sent")).otherwise(F.lit(0.0)) - F.col("allowed_loss_ratio")
        ).alias("loss_over_allowance"),
    )


def percentile_tables_frame(percentiles: DataFrame, cells: DataFrame) -> DataFrame:
    """The percentile table with `<p>_or_max` chain columns and the raw counts from cells.parquet (summed over a
    repeated cell's repeats, as its merged rows are)."""
    counts = [c for c in ACCOUNTING_COLUMNS if c in cells.columns]
    raw = cells.groupBy(*MERGED_KEYS).agg(*[F.sum(c).alias(f"raw_{c}") for c in counts])
    chain = [
        F.coalesce(F.col(percentile_column(p)), F.col("max_ns")).alias(f"{percentile_column(p)}_or_max")
        for p in PERCENTILES
    ]
    return percentiles.join(raw, list(MERGED_KEYS), "left").select("*", *chain)
