"""Faults job: one row per fault of every cell (per repeat), what it cost, from the cells rows' `faults_json`.

Landing (bench_tasks.cell.landing, bench_tasks.core.faultcost) computed each fault's cost from the cell's own
samples; this table lays those records side by side across a run's cells, with the cell's identity and
`durable_acks` (whether the cell's settings promise that no acknowledged message is lost to one node's fault,
System.promises_no_acknowledged_loss), which the gate's `faults` suite reads. A fault landed before a field
existed has it null. Run alone: `spark-submit spark_jobs/faults.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs import jobargs, lakeio
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION, VERSION_FIELD

# A fault's record as landing writes it (bench_tasks.cell.faults.FiredFault and core.faultcost), in table order.
FAULT_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("kind", pa.string()),
    ("target", pa.string()),
    ("node", pa.int32()),
    ("at_s", pa.float64()),
    ("duration_s", pa.float64()),
    ("start_ns", pa.int64()),
    ("end_ns", pa.int64()),
    ("fired_s", pa.float64()),
    ("ended_s", pa.float64()),
    ("window_end_s", pa.float64()),
    ("leader_before", pa.int32()),
    ("leader_after", pa.int32()),
    ("first_arrival_after_s", pa.float64()),
    ("max_arrival_gap_s", pa.float64()),
    ("p99_baseline_ms", pa.float64()),
    ("p99_recovery_s", pa.float64()),
    ("p99_band_ms", pa.float64()),  # recovered: a rolling p99 at most this (core.recovery)
    ("scheduled", pa.int64()),
    ("sent", pa.int64()),
    ("send_errors", pa.int64()),
    ("lost", pa.int64()),
    ("duplicated", pa.int64()),
    ("acknowledged_but_lost", pa.int64()),
    ("rate_mbit", pa.float64()),  # bandwidth: the squeezed link's rate
    ("shaper_drops", pa.int64()),  # bandwidth: what the squeeze dropped, both ends of the node's link
    ("shaper_overlimits", pa.int64()),
)
IDENTITY = ("run_id", "run_date", "cell_id", "repeat", "series_key", "system", "version", "measurement", "label")
FAULTS_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        *(pa.field(name, pa.int32() if name == "repeat" else pa.string()) for name in IDENTITY),
        pa.field("status", pa.string()),
        pa.field("durable_acks", pa.bool_(), nullable=False),
        pa.field("fault", pa.int32(), nullable=False),
        *(pa.field(name, kind) for name, kind in FAULT_FIELDS),
    ]
)


def faults_table(cells: pa.Table) -> pa.Table:
    """One row per fault of each cells row (`fault`: its place in firing order, from 0); cells without faults
    give none. A field a record lacks (landed before it existed) is null."""
    rows = []
    for cell in cells.select([*IDENTITY, "status", "durable_acks", "faults_json"]).to_pylist():
        shared = {name: cell[name] for name in (*IDENTITY, "status")}
        shared |= {"schema_version": TABLES_SCHEMA_VERSION, "durable_acks": bool(cell["durable_acks"])}
        for place, record in enumerate(json.loads(cell["faults_json"] or "[]")):
            rows.append(shared | {"fault": place} | {name: record.get(name) for name, _ in FAULT_FIELDS})
    return pa.Table.from_pylist(rows, schema=FAULTS_SCHEMA)


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str]) -> list[Path]:
    """Compute the table of the runs from their cells tables and write one partition per run."""
    runs = [lakeio.find_run(lake, r) for r in run_ids]
    return lakeio.write_collected(lake, runs, {"faults": faults_table(lakeio.cells_table(lake, runs))})["faults"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-faults", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"faults: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
