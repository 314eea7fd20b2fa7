"""Exports of a landed run for other tools — the I/O edge of bench_tasks.interop.

  exports/run_date=D/run_id=R/omb/<cell>[-r<k>].json            OMB TestResult, one per run of a cell
  exports/run_date=D/run_id=R/omb/sixnines/<cell>[-r<k>].json   what OMB's fields cannot carry (beside, not
                                                                inside: OMB's Java reader refuses unknown keys)
  exports/run_date=D/run_id=R/hgrm/<cell>/<metric>-<response|service>.hgrm   repeats merged, as the tables
  exports/run_date=D/run_id=R/hgrm/tables/<table>.csv           the pipeline's tables of the run
Each export folder also holds EXPORT.md (what is where, and what was left out and why). A folder is written
whole or not at all and replaces an earlier export (bench_tasks.lake.storage.write_folder), in the lake (local or
S3) or in a local `out` folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InteropError
from ..lake.layout import CommittedCell, committed_cells
from ..lake.records import RECEIVED_SCHEMA, SENT_SCHEMA
from ..lake.retention import refuse_if_pruned
from ..lake.storage import LakePath, lake_path, read_parquet, write_folder
from ..report.data import RunData, acked_metric, find_run, load_run, read_parts
from .hgrm import hgrm_of
from .omb_result import (
    SERVICE_TIME_NOTE,
    SIDECAR_SCHEMA_VERSION,
    CellSamples,
    ResultMeta,
    response_and_service,
    to_test_result,
)
from .table_files import csv_bytes

EXPORTS_AREA = "exports"
INDEX = "EXPORT.md"
BASIS_NAMES = {"intended": "response", "sent": "service"}


@dataclass
class Export:
    """What an export wrote (`files`, relative to `folder`) and what it left out, each with the reason."""

    run_id: str
    folder: LakePath
    files: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def export_folder(lake_root: str | Path | LakePath, run_date: str, run_id: str, kind: str) -> LakePath:
    return lake_path(lake_root) / EXPORTS_AREA / f"run_date={run_date}" / f"run_id={run_id}" / kind


def export_omb(
    lake_root: str | Path | LakePath, run_id: str, out: Path | None = None, interval_s: float = 10.0
) -> Export:
    """One OMB TestResult JSON per run of every analysable e2e/publish/chain cell of RUN_ID."""
    if interval_s <= 0:
        raise InteropError("--interval", [f"{interval_s}: the reporting interval must be positive"])
    root = lake_path(lake_root)
    run_date, run_dir = find_run(root, run_id)
    refuse_if_pruned(root, run_date, run_id, "an OMB export (its timelines and percentiles are cut from every sample)")
    matrix = _matrix_name(root, run_date, run_id)
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    for cell in committed_cells(run_dir):
        result = json.loads((cell.folder / "result.json").read_text())
        stem = cell.cell_id if int(result.get("repeats") or 1) == 1 else f"{cell.cell_id}-r{cell.repeat}"
        reason = _omb_skip_reason(result)
        if reason:
            skipped.append(f"{stem} ({result.get('label', '')}): {reason}")
            continue
        samples = _cell_samples(cell, result)
        files[f"{stem}.json"] = _json(to_test_result(samples, _meta(result, matrix), interval_s))
        files[f"sixnines/{stem}.json"] = _json(_sidecar(result, samples, run_date, stem, interval_s))
    files[INDEX] = _omb_index(run_id, sorted(n for n in files if "/" not in n), skipped, interval_s).encode()
    return _write(Export(run_id, _target(root, run_date, run_id, "omb", out)), files, skipped)


def export_hgrm(lake_root: str | Path | LakePath, run_id: str, out: Path | None = None) -> Export:
    """A `.hgrm` per cell × metric × basis (measure phase, repeats merged) and CSV of the run's tables."""
    refuse_if_pruned(lake_root, find_run(lake_root, run_id)[0], run_id, "an .hgrm export (exact, from every sample)")
    run = load_run(lake_root, run_id)
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    for cell_id, parts in _by_cell(run).items():
        analysed = [c for c in parts if c.analysis is not None]
        if not analysed:
            skipped.append(f"{cell_id} ({parts[0].key.label}): {parts[0].analysis_error or 'no samples'}")
            continue
        for metric in analysed[0].analysis.metrics:  # type: ignore[union-attr]
            for basis, name in BASIS_NAMES.items():
                values = np.concatenate([_measure_values(c, metric, basis) for c in analysed])
                files[f"{cell_id}/{metric}-{name}.hgrm"] = hgrm_of(values).encode()
    for name, table in run.tables.items():
        files[f"tables/{name}.csv"] = csv_bytes(table)
    files[INDEX] = _hgrm_index(run, sorted(files), skipped).encode()
    return _write(Export(run.run_id, _target(run.lake_root, run.run_date, run.run_id, "hgrm", out)), files, skipped)


def _by_cell(run: RunData) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for c in run.cells:
        out.setdefault(c.key.cell_id, []).append(c)
    return out


def _measure_values(cell: Any, metric: str, basis: str) -> np.ndarray:
    """One repeat's measure-phase latencies (the samples the tables summarize)."""
    from ..report.cell_view import measure_values

    return measure_values(cell, metric, basis)


def _omb_skip_reason(result: Mapping[str, Any]) -> str | None:
    measurement = result["spec"]["measurement"]
    if not result.get("phases"):
        return "the cell never started its schedule, so it has no samples"
    if result.get("status") != "ok":
        return f"the cell failed ({result.get('reason')}); its numbers are not a result"
    if measurement == "rtt":
        return "a request/reply round trip has no OMB field (its .hgrm files are in the hgrm export)"
    return None


def _cell_samples(cell: CommittedCell, result: Mapping[str, Any]) -> CellSamples:
    phases = result["phases"]
    return CellSamples(
        sent=read_parts(cell.folder, "sent-p*.parquet", SENT_SCHEMA),
        received=read_parts(cell.folder, "received-c*.parquet", RECEIVED_SCHEMA),
        measurement=result["spec"]["measurement"],
        acked_metric=acked_metric(dict(result)),
        measure_start_ns=int(phases["measure_start_ns"]),
        measure_end_ns=int(phases["measure_end_ns"]),
    )


def _meta(result: Mapping[str, Any], matrix: str) -> ResultMeta:
    """OMB's descriptive fields: the OMB workload's own name when the matrix was imported from one (so the
    result charts beside OMB's), else the matrix; the cell's label as the `driver` its charts use as legend."""
    spec, origin = result["spec"], result.get("origin") or {}
    workload = spec["workload"]
    repeats = int(result.get("repeats") or 1)
    return ResultMeta(
        workload=str(origin.get("workload_name") or f"sixnines {matrix}"),
        driver=str(result.get("label") or result["cell_id"]) + (f" r{result.get('repeat')}" if repeats > 1 else ""),
        message_size=int(workload["message_size_bytes"]),
        partitions=int((spec.get("broker") or {}).get("partitions", 1)),  # routes without partitions: one
        producers=int(workload.get("producers", 1)),
        consumers=int(workload.get("consumers", 1)),
    )


def _sidecar(result: Mapping[str, Any], samples: CellSamples, run_date: str, stem: str, interval_s: float) -> dict:
    return {
        "schema_version": SIDECAR_SCHEMA_VERSION,
        "note": SERVICE_TIME_NOTE,
        "omb_file": f"../{stem}.json",
        "interval_s": interval_s,
        "run_id": result.get("run_id"),
        "run_date": run_date,
        "cell_id": result.get("cell_id"),
        "series_key": result.get("series_key"),
        "repeat": result.get("repeat"),
        "repeats": result.get("repeats"),
        "label": result.get("label"),
        "status": result.get("status"),
        "spec": result.get("spec"),
        "origin": result.get("origin"),
        "accounting": result.get("accounting"),
        "latency_ms": response_and_service(samples),
    }


def _matrix_name(root: LakePath, run_date: str, run_id: str) -> str:
    cells = root / "runs" / f"run_date={run_date}" / f"run_id={run_id}" / "cells.parquet"
    try:
        names = read_parquet(cells, columns=["matrix"])["matrix"].to_pylist()
    except Exception:  # no cells table: the run id names it well enough
        return run_id
    return str(names[0]) if names else run_id


def _target(root: LakePath, run_date: str, run_id: str, kind: str, out: Path | None) -> LakePath:
    """The export's folder: in the lake, or `out` — which must be empty or an earlier export (it is replaced)."""
    if out is None:
        return export_folder(root, run_date, run_id, kind)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / INDEX).exists())):
        raise InteropError(
            str(out), [f"not empty and not an earlier export (no {INDEX}); the export replaces its folder"]
        )
    return out


def _write(export: Export, files: Mapping[str, bytes], skipped: list[str]) -> Export:
    write_folder(export.folder, files)
    export.files = sorted(files)
    export.skipped = skipped
    return export


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, default=str) + "\n").encode()


def _bullets(lines: Iterable[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) or "- none"


def _omb_index(run_id: str, results: list[str], skipped: list[str], interval_s: float) -> str:
    return (
        f"# OpenMessaging Benchmark results of sixnines run {run_id}\n\n"
        f"One OMB `TestResult` JSON per run of a cell (reporting interval {interval_s:g} s); OMB's chart script "
        "(`bin/create_charts.py`) and `ResultsToCsv` read this folder as they read OMB's own results. "
        "`sixnines/` holds, per file, what OMB's fields cannot carry.\n\n"
        f"{SERVICE_TIME_NOTE}\n\n## Results\n\n{_bullets(results)}\n\n## Not exported\n\n{_bullets(skipped)}\n"
    )


def _hgrm_index(run: RunData, files: list[str], skipped: list[str]) -> str:
    labels = {c.key.cell_id: c.key.label for c in run.cells}
    hgrms = [f"`{f}` — {labels.get(f.split('/')[0], '')}" for f in files if f.endswith(".hgrm")]
    tables = [f"`{f}`" for f in files if f.startswith("tables/")]
    return (
        f"# HdrHistogram percentile distributions of sixnines run {run.run_id}\n\n"
        "Each `.hgrm` is one cell's measure-phase latencies of one metric, response time (from the intended "
        "send) or service time (from the actual send), every repeat merged; values in milliseconds, printed as "
        "Java HdrHistogram's `outputPercentileDistribution` prints them (HdrHistogram's online plotter and "
        "HistogramLogAnalyzer read them).\n\n"
        f"## Distributions\n\n{_bullets(hgrms)}\n\n## Tables (CSV; the data-quality gate: {run.gate})\n\n"
        f"{_bullets(tables)}\n\n## Not exported\n\n{_bullets(skipped)}\n"
    )
