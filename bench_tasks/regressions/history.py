"""Reading the published history: `lake/history/percentiles/D__R.parquet` (every run) and
`lake/history/capacity/D__R.parquet` (the runs that searched capacity).

The analytics Spark job writes it (spark_jobs/percentiles.py, publish.py); this module does not import
spark_jobs, so the columns it relies on are named here, once, and a file that lacks one is an error naming the
file and the column rather than a KeyError deep in the analysis.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..core.percentiles import PERCENTILES
from ..lake.layout import CAPACITY_HISTORY_DIR, HISTORY_DIR, PUBLISHED_AREA, committed_run_file
from ..lake.layout import history_files as lake_history_files
from ..lake.storage import LakePath, lake_path, read_parquet, read_parquet_schema
from .model import RegressionError

HISTORY_AREA = HISTORY_DIR
# Schema versions of the analytics tables this reader understands (spark_jobs.percentiles.TABLES_SCHEMA_VERSION).
SUPPORTED_SCHEMA_VERSIONS = frozenset({1, 2})


def percentile_column(percentile: str) -> str:
    """`99.9` → `p99_9_ns`, the analytics job's naming rule (spark_jobs.exact.percentile_column); `max` → `max_ns`."""
    return "max_ns" if percentile == "max" else f"p{percentile.replace('.', '_')}_ns"


# Every percentile of the table plus the maximum: the series regression detection follows.
SERIES_PERCENTILES: tuple[str, ...] = (*PERCENTILES, "max")
VALUE_COLUMNS: dict[str, str] = {p: percentile_column(p) for p in SERIES_PERCENTILES}
IDENTITY_COLUMNS: tuple[str, ...] = (
    "schema_version",
    "run_id",
    "cell_id",
    "run_date",
    "series_key",
    "system",
    "version",
    "label",
    "metric",
    "basis",
    "leader",
)
REQUIRED_COLUMNS: tuple[str, ...] = (*IDENTITY_COLUMNS, *VALUE_COLUMNS.values())


def variation_column(percentile: str) -> str:
    """`99.9` → `p99_9_variation_pct`: the run-to-run % variation across a repeated cell's repeats
    (spark_jobs.repeats.variation_column); `max` → `max_variation_pct`."""
    return percentile_column(percentile).removesuffix("_ns") + "_variation_pct"


# A cell's outcome over its repeats (`ok` only when every repeat was); absent from tables written before it.
STATUS_COLUMN = "status"
# Present from table schema 2 on, and null for cells run once: a history without them has no repeat noise.
NOISE_COLUMNS: dict[str, str] = {p: variation_column(p) for p in SERIES_PERCENTILES}


def history_files(lake_root: str | Path | LakePath) -> list[LakePath]:
    """The history's files (one per published run, see bench_tasks.lake.HISTORY_DIR) in run date order."""
    return lake_history_files(lake_root)


def _column_names(path: LakePath, required: tuple[str, ...]) -> set[str]:
    """The file's columns; an error naming the file when it is unreadable or lacks one of `required`."""
    try:
        names = set(read_parquet_schema(path).names)
    except Exception as exc:  # pyarrow raises several types for a damaged file
        raise RegressionError(f"{path}: not a readable Parquet file ({exc})") from exc
    missing = [c for c in required if c not in names]
    if missing:
        raise RegressionError(f"{path}: missing column(s) {', '.join(missing)} needed by regression detection")
    return names


def read_file(path: LakePath) -> list[dict[str, Any]]:
    """The overall rows (leader null) of the cells that ended `ok` in one part file, only the required columns. A
    failed cell is published with its reason, but its percentiles measure the failure (a starved harness, a
    stopped schedule), not the system: no baseline, change point or release history takes them."""
    names = _column_names(path, REQUIRED_COLUMNS)
    optional = [c for c in (*NOISE_COLUMNS.values(), STATUS_COLUMN) if c in names]
    rows = read_parquet(path, columns=[*REQUIRED_COLUMNS, *optional]).to_pylist()
    versions = {r["schema_version"] for r in rows} - SUPPORTED_SCHEMA_VERSIONS
    if versions:
        raise RegressionError(
            f"{path}: schema_version {sorted(versions)} not supported (this reader knows "
            f"{sorted(SUPPORTED_SCHEMA_VERSIONS)})"
        )
    return [r for r in rows if r["leader"] is None and r.get(STATUS_COLUMN, "ok") in ("ok", None)]


def read_history(lake_root: str | Path | LakePath) -> list[dict[str, Any]]:
    """Every overall row of every published run. An empty history is an error: there is nothing to check."""
    files = history_files(lake_root)
    if not files:
        area = lake_path(lake_root) / HISTORY_AREA
        raise RegressionError(f"{area}: no published history (<run_date>__<run_id>.parquet)")
    return [row for path in files for row in read_file(path)]


# The capacity table's columns a capacity series needs (spark_jobs.capacity.CAPACITY_FIELDS).
CAPACITY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "run_date",
    "cell_id",
    "series_key",
    "label",
    "system",
    "version",
    "objectives",
    "capacity_per_s",
    "limit",
)


def read_capacity_history(lake_root: str | Path | LakePath) -> list[dict[str, Any]]:
    """Every published capacity row; none when no run searched capacity (that is not an error)."""
    rows: list[dict[str, Any]] = []
    for path in lake_history_files(lake_root, CAPACITY_HISTORY_DIR):
        _column_names(path, CAPACITY_COLUMNS)
        rows += read_parquet(path, columns=list(CAPACITY_COLUMNS)).to_pylist()
    return rows


def read_repeat_spreads(lake_root: str | Path | LakePath, runs: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """The published `repeats.csv` rows of each (run_date, run_id): per repeated cell × metric × basis the min,
    median and max of every statistic across its repeats (ns, as floats). A run without repeats has none."""
    rows: list[dict[str, Any]] = []
    for run_date, run_id in sorted(set(runs)):
        found = committed_run_file(lake_root, PUBLISHED_AREA, run_date, run_id, "repeats.csv")
        if found is not None:
            rows += [_typed_spread(row) for row in csv.DictReader(io.StringIO(found.read_text()))]
    return rows


def _typed_spread(row: dict[str, str]) -> dict[str, Any]:
    return {k: (float(v) if v and k.endswith("_ns") else (v or None)) for k, v in row.items()}


def published_run(lake_root: str | Path | LakePath, cell_id: str) -> tuple[str, str] | None:
    """(run_date, run_id) of the newest published run that measured cell `cell_id` (its spec and release) and
    where it ended `ok`, or None: what a matrix with `reuse_published` takes instead of measuring the cell again (a
    cell that failed is measured again)."""
    found = None
    for path in history_files(lake_root):
        status = [STATUS_COLUMN] if STATUS_COLUMN in read_parquet_schema(path).names else []
        table = read_parquet(path, columns=["cell_id", "run_date", "run_id", *status])
        for row in table.to_pylist():
            if row["cell_id"] == cell_id and row.get(STATUS_COLUMN, "ok") in ("ok", None):
                found = max(found or ("", ""), (str(row["run_date"]), str(row["run_id"])))
    return found
