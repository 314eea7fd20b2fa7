"""The runs a lake holds: listing them, finding one by id, and naming the newest.

Every command that takes a run addresses it the same way (a RUN_ID, or `--latest`), and a run's date is known
only from the partition it landed under, so this is the one place that reads `runs/run_date=D/run_id=R/`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import SixninesError
from .retention import pruned_marker
from .storage import LakePath, lake_path, read_parquet


class RunNotFound(SixninesError):
    """The run asked for is not in the lake (exit 2: the input names something that does not exist)."""

    exit_code = 2


@dataclass(frozen=True)
class RunSummary:
    """One run as `sixnines runs` lists it."""

    run_id: str
    run_date: str
    matrix: str
    started_at: str
    ok: int
    failed: int
    report: LakePath | None  # None until `sixnines report` (or the DAG's report task) wrote it
    raw_pruned: str | None = None  # when `sixnines lake prune` removed its raw samples (bench_tasks.lake.retention)


def report_path(lake_root: str | Path | LakePath, run_date: str, run_id: str) -> LakePath:
    """Where a run's HTML report is written (and looked for)."""
    return lake_path(lake_root) / "reports" / f"run_date={run_date}" / f"run_id={run_id}" / "report.html"


def list_runs(lake_root: str | Path | LakePath) -> list[RunSummary]:
    """Every run with a cells table, newest first (by the time its first cell started)."""
    root = lake_path(lake_root)
    found = [_summary(root, path) for path in (root / "runs").glob("run_date=*/run_id=*/cells.parquet")]
    return sorted(found, key=lambda r: (r.started_at, r.run_id), reverse=True)


def find_run_date(lake_root: str | Path | LakePath, run_id: str) -> str:
    """The date partition run RUN_ID landed under; RunNotFound listing the newest runs when it is absent."""
    root = lake_path(lake_root)
    hits = sorted((root / "runs").glob(f"run_date=*/run_id={run_id}/cells.parquet"))
    hits = hits or sorted((root / "raw").glob(f"run_date=*/run_id={run_id}"))  # cells table not written yet
    if not hits:
        known = [r.run_id for r in list_runs(root)[:5]]
        hint = f"; newest runs: {', '.join(known)}" if known else "; the lake has no runs yet (sixnines run …)"
        raise RunNotFound(f"no run {run_id!r} in the lake {root}{hint}")
    partition = hits[-1].parent if hits[-1].name == "cells.parquet" else hits[-1]
    return partition.parent.name.removeprefix("run_date=")


def latest_run_id(lake_root: str | Path | LakePath) -> str:
    runs = list_runs(lake_root)
    if not runs:
        raise RunNotFound(f"--latest: the lake {lake_path(lake_root)} has no runs yet (sixnines run …)")
    return runs[0].run_id


def resolve_run_id(lake_root: str | Path | LakePath, run_id: str | None, latest: bool) -> str:
    """RUN_ID or `--latest`, exactly one of them."""
    if run_id and latest:
        raise RunNotFound(f"give RUN_ID ({run_id}) or --latest, not both")
    if latest:
        return latest_run_id(lake_root)
    if not run_id:
        raise RunNotFound("give a RUN_ID (see `sixnines runs`) or --latest")
    find_run_date(lake_root, run_id)
    return run_id


def _summary(root: LakePath, cells_file: LakePath) -> RunSummary:
    run_dir = cells_file.parent
    run_id, run_date = run_dir.name.removeprefix("run_id="), run_dir.parent.name.removeprefix("run_date=")
    rows = read_parquet(cells_file, ["matrix", "status", "started_at"]).to_pylist()
    ok = sum(1 for r in rows if r["status"] == "ok")
    report = report_path(root, run_date, run_id)
    return RunSummary(
        run_id=run_id,
        run_date=run_date,
        matrix=rows[0]["matrix"] if rows else "",
        started_at=min((r["started_at"] or "" for r in rows), default=""),
        ok=ok,
        failed=len(rows) - ok,
        report=report if report.exists() else None,
        raw_pruned=_pruned_at(root, run_date, run_id),
    )


def _pruned_at(root: LakePath, run_date: str, run_id: str) -> str | None:
    marker = pruned_marker(root, run_date, run_id)
    return None if marker is None else str(marker.get("pruned_at") or marker.get("started_at"))
