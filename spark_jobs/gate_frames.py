"""The frames the Great Expectations gate validates, built in Spark from the analysis and the tables.

They are small — one row per producer, per cell, per table row — so the gate hands them to GX as pandas
frames. GX then only compares columns with bounds (expectations/): per-producer and per-cell aggregates and
the schedule-lag quantile are computed here, exactly (spark_jobs.ledger, spark_jobs.analysis), not by GX.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench_tasks import PERCENTILES
from spark_jobs.analysis import Analysis
from spark_jobs.exact import percentile_column
from spark_jobs.levels import LAG_PERCENTILE, REPEAT
from spark_jobs.percentiles import ACCOUNTING_COLUMNS
from spark_jobs.samples import CELL_KEYS, LAG, MERGED_KEYS


def raw_producers_frame(result: Analysis) -> DataFrame:
    """One row per producer of every cell (every phase): its rows, seq range, duplicated seqs, rows missing a
    key, and its lowest latency of each kind (spark_jobs.ledger.producers)."""
    return result.ledger.producers


def raw_cells_frame(result: Analysis) -> DataFrame:
    """One row per cell: measure-phase sends over rate × measure seconds, send-lag p99.9 (the max when too
    few samples support it, as the harness's own gate does) over the cell's limit (null for rtt), loss."""
    lag = result.summary.where((F.col("level") == REPEAT) & (F.col("metric") == LAG)).select(
        F.col("g").alias("unit"),
        F.coalesce(F.col(percentile_column(LAG_PERCENTILE)), F.col("max_ns")).alias("lag_gate_ns"),
    )
    limit_ns = F.col("max_schedule_lag_ms") * F.lit(1e6)
    accounting = result.ledger.accounting.drop(*CELL_KEYS)
    rows = result.facts.join(accounting, "unit", "left").join(lag, "unit", "left")
    loss_ratio = F.when(F.col("sent") > 0, F.col("lost") / F.col("sent")).otherwise(F.lit(0.0))
    return rows.select(
        *CELL_KEYS,
        "measurement",
        F.col("sent").alias("measure_sent"),
        (F.col("sent") / (F.col("rate_per_s") * F.col("measure_s"))).alias("measure_ratio"),
        "lag_gate_ns",
        F.when(F.col("measurement") != "rtt", F.col("lag_gate_ns") / limit_ns).alias("lag_over_limit"),
        "lost",
        F.when(F.col("delivery_guaranteed"), F.col("lost")).otherwise(F.lit(0)).alias("lost_guaranteed"),
        loss_ratio.alias("loss_ratio"),
        # how far the loss goes past what the cell's matrix allows (workload.allowed_loss_ratio); <= 0 passes
        (loss_ratio - F.col("allowed_loss_ratio")).alias("loss_over_allowance"),
    )


def faults_frame(faults: DataFrame) -> DataFrame:
    """The faults table with `acknowledged_but_lost_promised`: a fault's acknowledged_but_lost where its cell's
    settings promise none (`durable_acks`), else 0 (a fault landed without its cost counts none)."""
    promised = F.when(F.col("durable_acks"), F.coalesce(F.col("acknowledged_but_lost"), F.lit(0))).otherwise(F.lit(0))
    return faults.select(
        *CELL_KEYS,
        "fault",
        "kind",
        "node",
        "durable_acks",
        "acknowledged_but_lost",
        promised.alias("acknowledged_but_lost_promised"),
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
