"""Writing a check's results: `lake/regressions/run_date=D/run_id=R/{change_points.parquet, alerts.json}`.

Both files are committed as one folder (bench_tasks.lake.storage.write_folder: a staging folder renamed into place
locally; on S3 an `attempt=…` folder made visible by its `_committed.json` marker), so a reader (the report, the
notifier: `bench_tasks.lake.layout.committed_run_file`) sees either the previous check of the run or this one, never
half of each; re-checking a run replaces its folder.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..lake.layout import REGRESSIONS_AREA, run_output_dir
from ..lake.storage import LakePath, write_folder
from .model import RESULTS_SCHEMA_VERSION, RegressionResult

CHANGE_POINTS_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("checked_run_id", pa.string()),
        ("series_key", pa.string()),
        ("metric", pa.string()),
        ("basis", pa.string()),
        ("percentile", pa.string()),
        ("view", pa.string()),
        ("method", pa.string()),
        ("label", pa.string()),
        ("system", pa.string()),
        ("index", pa.int32()),
        ("run_date", pa.string()),
        ("run_id", pa.string()),
        ("before", pa.float64()),
        ("after", pa.float64()),
        ("unit", pa.string()),
        ("higher_is_worse", pa.bool_()),
        ("relative_change", pa.float64()),
        ("p_value", pa.float64()),
        ("alert", pa.bool_()),
        ("cell_ids", pa.list_(pa.string())),
        ("runs_before", pa.list_(pa.string())),
        ("runs_after", pa.list_(pa.string())),
        ("versions_before", pa.list_(pa.string())),
        ("versions_after", pa.list_(pa.string())),
        ("spread", pa.list_(pa.float64())),
    ],
    metadata={b"sixnines.schema_version": str(RESULTS_SCHEMA_VERSION).encode()},
)


def results_dir(lake_root: str | Path | LakePath, result: RegressionResult) -> LakePath:
    return run_output_dir(lake_root, REGRESSIONS_AREA, result.run_date, result.run_id)


def change_points_table(result: RegressionResult) -> pa.Table:
    """One row per change point (an empty table keeps the schema), flagged when it is an alert's."""
    alerting = [a.change for a in result.alerts]
    rows = [
        {
            "schema_version": RESULTS_SCHEMA_VERSION,
            "checked_run_id": result.run_id,
            "alert": c in alerting,
            **c.to_dict(),
        }
        for c in result.change_points
    ]
    return pa.Table.from_pylist(rows, schema=CHANGE_POINTS_SCHEMA)


def write_results(lake_root: str | Path | LakePath, result: RegressionResult) -> LakePath:
    """Write both files as one folder committed whole (bench_tasks.lake.storage.write_folder), replacing an earlier
    check of the run; returns where the files are (the folder locally, its committed attempt on S3)."""
    sink = pa.BufferOutputStream()
    pq.write_table(change_points_table(result), sink)
    files = {
        "change_points.parquet": sink.getvalue().to_pybytes(),
        "alerts.json": json.dumps(result.to_dict(), indent=2, sort_keys=True).encode("utf-8"),
    }
    return write_folder(results_dir(lake_root, result), files)
