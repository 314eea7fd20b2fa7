"""The report's I/O edge: find a run in the lake and recompute each cell from its raw samples.

Figures come from the raw lake, not from Spark's tables, so a report works on a machine without Spark:
every cell's series and percentiles are recomputed exactly with bench_tasks.core.analysis (never averaged). A run
whose raw samples were pruned (bench_tasks.lake.prune) reports what landing recorded in each result.json, the same
exact numbers, without the per-sample series: its charts say they are gone. What
the pipeline wrote beside the run — tables, data-quality results, regression alerts — is read defensively
and shown when present; a file that is missing or unreadable is reported as such, never fatal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..core.analysis import CellAnalysis, analyze
from ..lake.layout import (
    PUBLISHED_AREA,
    QUARANTINE_AREA,
    REGRESSIONS_AREA,
    CommittedCell,
    committed_cells,
    committed_run_file,
)
from ..lake.records import RECEIVED_SCHEMA, SENT_SCHEMA
from ..lake.retention import pruned_marker
from ..lake.runs import RunNotFound, find_run_date
from ..lake.storage import LakePath, committed_folder, lake_path, read_parquet
from ..systems import system_of
from .pairing import CellKey, ReportError

GATE_PASSED, GATE_FAILED, GATE_UNCHECKED = "passed", "failed", "not checked"


@dataclass
class CellData:
    """One landed cell: what result.json recorded, and the analysis recomputed from its Parquet files."""

    key: CellKey
    folder: LakePath
    result: dict[str, Any]
    analysis: CellAnalysis | None
    analysis_error: str | None = None
    samples_pruned: str | None = None  # when its raw samples were pruned: numbers as landed, no per-sample series

    @property
    def status(self) -> str:
        return str(self.result.get("status", "unknown"))

    @property
    def t0_ns(self) -> int | None:
        return (self.result.get("phases") or {}).get("t0_ns")


@dataclass
class RunData:
    """A run's cells plus whatever the pipeline wrote about it (each None when absent)."""

    lake_root: LakePath
    run_id: str
    run_date: str
    cells: list[CellData]
    tables: dict[str, pa.Table] = field(default_factory=dict)  # every row: the report shows a head, links the rest
    gate: str = GATE_UNCHECKED  # the Great Expectations verdict: passed (published), failed (quarantined)
    validation: Any = None
    regressions: Any = None
    history_series: list[Any] = field(default_factory=list)  # bench_tasks.regressions Series, when alerts exist
    release_histories: list[Any] = field(default_factory=list)  # its cells across releases (regressions.releases)
    notes: list[str] = field(default_factory=list)  # files that exist but could not be read
    capacity: list[dict[str, Any]] = field(default_factory=list)  # the run's capacity searches (capacity.json)


def find_run(lake_root: str | Path | LakePath, run_id: str) -> tuple[str, LakePath]:
    """The run's date and raw folder (bench_tasks.lake.runs names the newest runs when it is not in the lake)."""
    root = lake_path(lake_root)
    try:
        run_date = find_run_date(root, run_id)
    except RunNotFound as exc:
        raise ReportError(str(exc)) from None
    return run_date, root / "raw" / f"run_date={run_date}" / f"run_id={run_id}"


def load_run(lake_root: str | Path | LakePath, run_id: str) -> RunData:
    root = lake_path(lake_root)
    run_date, run_dir = find_run(root, run_id)
    marker = pruned_marker(root, run_date, run_id)
    pruned = None if marker is None else str(marker.get("pruned_at") or marker.get("started_at"))
    cells = [load_cell(c.folder, run_id, c.cell_id, pruned) for c in _cell_folders(root, run_dir)]
    run = RunData(root, run_id, run_date, cells)
    _load_pipeline_outputs(run)
    searches = run_dir / "capacity.json"
    if searches.exists():
        run.capacity = json.loads(searches.read_text()).get("cells") or []
    return run


def _cell_folders(lake_root: LakePath, run_dir: LakePath) -> list[CommittedCell]:
    """Committed cells (each repeat of a repeated cell) in landing order (the cells table's row order), then
    any the table does not list."""
    found = [c for c in committed_cells(run_dir) if (c.folder / "result.json").exists()]
    cells_path = lake_root / "runs" / run_dir.parent.name / run_dir.name / "cells.parquet"
    try:
        rows = read_parquet(cells_path).to_pylist()
    except Exception:  # absent or unreadable: folder order is as good
        rows = []
    rank = {(row["cell_id"], row.get("repeat") or 1): i for i, row in enumerate(rows)}
    return sorted(found, key=lambda c: rank.get((c.cell_id, c.repeat), len(rank)))


def load_cell(folder: LakePath, run_id: str, cell_id: str | None = None, pruned: str | None = None) -> CellData:
    """A landed cell: recomputed from its raw samples, or when they were `pruned` (at that time) from its
    result.json, which landing wrote from the same samples."""
    result = json.loads((folder / "result.json").read_text())
    key = CellKey(
        run_id=str(result.get("run_id") or run_id),
        cell_id=str(result.get("cell_id") or cell_id or folder.name.removeprefix("cell_id=")),
        series_key=str(result.get("series_key", "")),
        label=str(result.get("label", "")),
        spec=result.get("spec") or {},
        repeat=int(result.get("repeat") or 1),
        repeats=int(result.get("repeats") or 1),
    )
    cell = CellData(key, folder, result, None, samples_pruned=pruned)
    phases = result.get("phases")
    if not phases:
        cell.analysis_error = "the cell never started its schedule, so it has no samples"
        return cell
    if pruned and "generator" not in result:
        cell.analysis_error = f"its raw samples were pruned ({pruned}) and landing recorded no analysis"
        return cell
    try:
        cell.analysis = CellAnalysis.from_dict(result) if pruned else recompute(folder, result)
    except Exception as exc:  # a report still shows what result.json says about a cell it cannot recompute
        cell.analysis_error = f"{type(exc).__name__}: {exc}"
    return cell


def recompute(folder: LakePath, result: dict[str, Any]) -> CellAnalysis:
    """The cell's analysis from its landed Parquet files, as landing computed it."""
    spec = result["spec"]
    measurement = spec["measurement"]
    phases = result["phases"]
    return analyze(
        read_parts(folder, "sent-p*.parquet", SENT_SCHEMA),
        read_parts(folder, "received-c*.parquet", RECEIVED_SCHEMA),
        measurement,
        acked_metric(result),
        (phases["measure_start_ns"], phases["measure_end_ns"]),
        float(spec["workload"]["rate_per_s"]),
        read_parts(folder, "relayed-r*.parquet", RECEIVED_SCHEMA) if measurement == "chain" else None,
    )


def acked_metric(result: dict[str, Any]) -> str | None:
    """What an ack meant in this cell. landing.acked_metric decided it when the cell landed; its choice is
    recorded as the metric names in result.json, and the spec rule is the fallback for a failed analysis."""
    metrics = result.get("metrics") or {}
    for name in ("rtt", "publish"):
        if name in metrics:
            return name
    return system_of(result["spec"]).acked_metric(result["spec"])


def read_parts(folder: LakePath, pattern: str, schema: pa.Schema) -> pa.Table:
    """A cell's raw files of one kind (`sent-p*.parquet`, …) as one table of the current schema."""
    parts = [conform(read_parquet(p), schema) for p in sorted(folder.glob(pattern))]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file of an older schema version (records.SCHEMA_VERSION history) with the columns it predates as
    nulls, so one analysis reads every version."""
    columns = [
        table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type) for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _load_pipeline_outputs(run: RunData) -> None:
    """Tables, data-quality results and regression alerts written for this run, when they exist."""
    part = f"run_date={run.run_date}/run_id={run.run_id}"
    for folder in sorted((run.lake_root / "tables").glob(f"*/{part}")):
        name = folder.parent.parent.name
        try:
            files = committed_folder(folder)  # an S3 table is its committed attempt
            if files is None:
                continue
            run.tables[name] = read_parquet(files)
        except Exception as exc:
            run.notes.append(f"table {name} could not be read: {exc}")
    run.gate = gate_verdict(run.lake_root, run.run_date, run.run_id)
    # Only committed folders count: on S3 a half-written quarantine or check is not read (storage.committed_file).
    validation = committed_run_file(run.lake_root, QUARANTINE_AREA, run.run_date, run.run_id, "validation.json")
    if validation is not None:
        run.validation = _read_json(validation, run)
    alerts = committed_run_file(run.lake_root, REGRESSIONS_AREA, run.run_date, run.run_id, "alerts.json")
    if alerts is not None:
        run.regressions = _read_json(alerts, run)
        try:  # the alerted series themselves, so the report can plot them
            from ..regressions.detect import history_series

            run.history_series = history_series(run.lake_root)
        except Exception as exc:
            run.notes.append(f"history could not be read for the regression plots: {exc}")
    try:
        run.release_histories = release_histories_of(run)
    except Exception as exc:
        run.notes.append(f"history could not be read for the release history: {exc}")


def release_histories_of(run: RunData) -> list[Any]:
    """The run's cells across every release the published history holds them on (none before a publication)."""
    from ..lake.layout import history_files
    from ..regressions.history import read_history, read_repeat_spreads
    from ..regressions.releases import release_histories

    if not history_files(run.lake_root):
        return []
    keys = {c.result.get("series_key") for c in run.cells}
    rows = [r for r in read_history(run.lake_root) if r["series_key"] in keys]
    spreads = read_repeat_spreads(run.lake_root, {(str(r["run_date"]), str(r["run_id"])) for r in rows})
    return release_histories(rows, spreads)


def gate_verdict(lake_root: LakePath, run_date: str, run_id: str) -> str:
    """What the data-quality gate decided: its tables published, or quarantined, or neither yet."""
    if committed_run_file(lake_root, PUBLISHED_AREA, run_date, run_id, "percentiles.csv") is not None:
        return GATE_PASSED
    if committed_run_file(lake_root, QUARANTINE_AREA, run_date, run_id, "validation.json") is not None:
        return GATE_FAILED
    return GATE_UNCHECKED


def _read_json(path: LakePath, run: RunData) -> Any:
    try:
        return json.loads(path.read_text())
    except Exception as exc:
        run.notes.append(f"{path.relative_to(run.lake_root)} could not be read: {exc}")
        return None
