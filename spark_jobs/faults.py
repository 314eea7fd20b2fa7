"""Faults job: one row per fault of every cell (per repeat), what it cost, from the cells rows' `faults_json`.

Landing (bench_tasks.cell.landing, bench_tasks.core.faultcost) computed each fault's cost from the cell's own
samples; this table lays those records side by side across a run's cells, with the cell's identity and
`durable_acks` (whether the cell's settings promise that no acknowledged message is lost to one node's fault,
System.promises_no_acknowledged_loss), which the gate's `faults` suite reads. A fault landed before a field
existed has it null. Run alone: `spark-submit spark_jobs/faults.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from spark_jobs import jobargs, lakeio
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION

# A fault's record as landing writes it (bench_tasks.cell.faults.FiredFault and core.faultcost), in table order.
FAULT_FIELDS: tuple[tuple[str, DataType], ...] = (
    ("kind", StringType()),
    ("target", StringType()),
    ("node", IntegerType()),
    ("at_s", DoubleType()),
    ("duration_s", DoubleType()),
    ("start_ns", LongType()),
    ("end_ns", LongType()),
    ("fired_s", DoubleType()),
    ("ended_s", DoubleType()),
    ("window_end_s", DoubleType()),
    ("leader_before", IntegerType()),
    ("leader_after", IntegerType()),
    ("first_arrival_after_s", DoubleType()),
    ("max_arrival_gap_s", DoubleType()),
    ("p99_baseline_ms", DoubleType()),
    ("p99_recovery_s", DoubleType()),
    ("p99_band_ms", DoubleType()),  # recovered: a rolling p99 at most this (core.recovery)
    ("scheduled", LongType()),
    ("sent", LongType()),
    ("send_errors", LongType()),
    ("lost", LongType()),
    ("duplicated", LongType()),
    ("acknowledged_but_lost", LongType()),
    ("rate_mbit", DoubleType()),  # bandwidth: the squeezed link's rate
    ("shaper_drops", LongType()),  # bandwidth: what the squeeze dropped, both ends of the node's link
    ("shaper_overlimits", LongType()),
)
FAULT_RECORD = ArrayType(StructType([StructField(name, kind) for name, kind in FAULT_FIELDS]))
IDENTITY = ("run_id", "run_date", "cell_id", "repeat", "series_key", "system", "version", "measurement", "label")


def faults_table(cells: DataFrame) -> DataFrame:
    """One row per fault of each cells row (`fault`: its place in firing order, from 0); cells without faults
    give none."""
    records = F.from_json(F.coalesce(F.col("faults_json"), F.lit("[]")), FAULT_RECORD)
    exploded = cells.select(*IDENTITY, "status", "durable_acks", F.posexplode(records).alias("fault", "f"))
    return exploded.select(
        F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
        *IDENTITY,
        "status",
        F.coalesce(F.col("durable_acks"), F.lit(False)).alias("durable_acks"),
        F.col("fault").cast("int").alias("fault"),
        *[F.col(f"f.{name}").alias(name) for name, _ in FAULT_FIELDS],
    )


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str]) -> list[Path]:
    """Compute the table of the runs from their cells tables and write one partition per run."""
    runs = [lakeio.find_run(lake, r) for r in run_ids]
    table = faults_table(lakeio.read_cells(spark, lake, runs))
    return lakeio.write_tables(lake, runs, {"faults": table})["faults"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-faults", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"faults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
