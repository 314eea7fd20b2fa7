"""Writing a check's results: `lake/regressions/run_date=D/run_id=R/{change_points.parquet, alerts.json}`.

Both files are written into a staging folder that is renamed into place, so a reader (the report, the
notifier) sees either the previous check of the run or this one, never half of each; re-checking a run
replaces its folder. On an S3 lake each file is one PUT (whole or absent), `alerts.json` last, since readers
start from it.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ..storage import LakePath, S3Path, lake_path, write_parquet_object, write_text
from .model import RESULTS_SCHEMA_VERSION, RegressionResult

REGRESSIONS_AREA = "regressions"

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
        ("before_ms", pa.float64()),
        ("after_ms", pa.float64()),
        ("relative_change", pa.float64()),
        ("p_value", pa.float64()),
        ("alert", pa.bool_()),
        ("cell_ids", pa.list_(pa.string())),
        ("runs_before", pa.list_(pa.string())),
        ("runs_after", pa.list_(pa.string())),
        ("versions_before", pa.list_(pa.string())),
        ("versions_after", pa.list_(pa.string())),
        ("spread_ms", pa.list_(pa.float64())),
    ],
    metadata={b"sixnines.schema_version": str(RESULTS_SCHEMA_VERSION).encode()},
)


def results_dir(lake_root: str | Path | LakePath, result: RegressionResult) -> LakePath:
    return lake_path(lake_root) / REGRESSIONS_AREA / f"run_date={result.run_date}" / f"run_id={result.run_id}"


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
    """Write both files atomically (staging folder + rename) and return the folder."""
    final = results_dir(lake_root, result)
    if isinstance(final, S3Path):
        write_parquet_object(change_points_table(result), final / "change_points.parquet")
        write_text(final / "alerts.json", json.dumps(result.to_dict(), indent=2, sort_keys=True))
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = final.with_name(f".staging-{final.name}-{secrets.token_hex(4)}")
    staging.mkdir()
    try:
        pq.write_table(change_points_table(result), staging / "change_points.parquet")
        (staging / "alerts.json").write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
        old = None
        if final.exists():
            old = final.with_name(f".replaced-{final.name}-{secrets.token_hex(4)}")
            os.replace(final, old)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old)
    return final
