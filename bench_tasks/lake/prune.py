"""Raw-sample retention: which runs' raw files may go, and removing them (`sixnines lake prune`).

A run's raw samples are its bulk (8 bytes a message, sent and received rows together) and are needed only to
analyse it again; its tables, `cell.hlog` histograms, `result.json` records, cells rows, history and reports
are small and stay. A run is pruned when all of these hold, else it is listed as skipped with the reason:

- its gate has spoken (its tables are published or quarantined): a run not analysed yet, or still landing,
  has no complete mark, and pruning it would lose numbers nobody computed;
- no cell of it is being written (a local `.staging/<run>` or a `.hosts/<run>` rendezvous folder);
- its own recorded time, the newest `finished_at` of its cells rows, is older than the limit (file times are
  not used: an S3 copy or a restore changes them).

Order, so that an interruption leaves nothing half-done: the run's marker (bench_tasks.lake.retention) is
written in state `pruning` first, then the files are deleted, then the marker says `pruned`. A run is never
left claiming raw files it lacks, and a later prune finds the `pruning` marker and finishes the job.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .layout import PUBLISHED_AREA, QUARANTINE_AREA, committed_cells, committed_run_file, write_json
from .retention import (
    MARKER_VERSION,
    RAW_SAMPLE_PATTERNS,
    STATE_PRUNED,
    STATE_PRUNING,
    marker_path,
    pruned_marker,
)
from .storage import LakePath, S3Path, lake_path, read_parquet


@dataclass(frozen=True)
class RunToPrune:
    """One run whose raw sample files go: which, how old, and what (files and their bytes)."""

    run_id: str
    run_date: str
    finished_at: str  # the run's own recorded time: its newest cell's finished_at
    cells: int
    files: tuple[LakePath, ...]
    bytes: int
    resumed: bool = False  # an interrupted prune (marker `pruning`) being finished

    def age_days(self, now: dt.datetime) -> float:
        return (now - dt.datetime.fromisoformat(self.finished_at)).total_seconds() / 86400


@dataclass(frozen=True)
class SkippedRun:
    run_id: str
    run_date: str
    reason: str


@dataclass
class PrunePlan:
    """What a prune would do: runs to prune, runs skipped and why, and how many runs are young enough to keep."""

    older_than_days: float
    now: dt.datetime
    runs: list[RunToPrune] = field(default_factory=list)
    skipped: list[SkippedRun] = field(default_factory=list)
    kept: int = 0

    @property
    def files(self) -> int:
        return sum(len(r.files) for r in self.runs)

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.runs)


Progress = Callable[[RunToPrune, int], None]  # (run, files removed so far)


def plan_prune(lake_root: str | Path | LakePath, older_than_days: float, now: dt.datetime | None = None) -> PrunePlan:
    """Decide, without removing anything, which runs' raw samples go (the dry run prints this)."""
    if older_than_days < 0:
        raise ValueError(f"older_than_days: {older_than_days} is negative")
    root = lake_path(lake_root)
    plan = PrunePlan(older_than_days, now or dt.datetime.now(dt.UTC))
    for run_dir in sorted(root.glob("raw/run_date=*/run_id=*")):
        run_id, run_date = run_dir.name.removeprefix("run_id="), run_dir.parent.name.removeprefix("run_date=")
        verdict = _judge(root, run_dir, run_id, run_date, plan)
        if isinstance(verdict, SkippedRun):
            plan.skipped.append(verdict)
        elif verdict is None:
            plan.kept += 1
        else:
            plan.runs.append(verdict)
    return plan


def _judge(
    root: LakePath, run_dir: LakePath, run_id: str, run_date: str, plan: PrunePlan
) -> RunToPrune | SkippedRun | None:
    """The run to prune, why it is skipped, or None when it is younger than the limit."""
    marker = pruned_marker(root, run_date, run_id)
    if marker is not None and marker.get("state") == STATE_PRUNED:
        return SkippedRun(run_id, run_date, f"already pruned ({marker.get('pruned_at')})")
    if marker is not None:  # interrupted: finish what the marker promised, whatever its age now
        return _listing(run_dir, run_id, run_date, str(marker.get("finished_at")), resumed=True)
    busy = _being_written(root, run_id)
    if busy:
        return SkippedRun(run_id, run_date, busy)
    if not _analysed(root, run_date, run_id):
        return SkippedRun(run_id, run_date, "not analysed yet (no published or quarantined tables)")
    finished = _finished_at(root, run_date, run_id)
    if finished is None:
        return SkippedRun(run_id, run_date, "no cells table with a finished_at: still being written")
    if (plan.now - finished).total_seconds() <= plan.older_than_days * 86400:
        return None
    listing = _listing(run_dir, run_id, run_date, finished.isoformat())
    return listing if listing.files else SkippedRun(run_id, run_date, "no raw sample files (nothing to prune)")


def _being_written(root: LakePath, run_id: str) -> str | None:
    """Why a cell of the run is being written now, or None. An S3 lake stages cells on the landing host, so
    there only the `.hosts` rendezvous shows; the analysed-run rule covers the rest."""
    for hidden in (".staging", ".hosts"):
        folder = root / hidden / run_id
        if folder.exists() and (isinstance(folder, S3Path) or any(Path(folder).iterdir())):
            return f"a cell is being written ({hidden}/{run_id} exists)"
    return None


def _analysed(root: LakePath, run_date: str, run_id: str) -> bool:
    """The run's complete mark: its gate published or quarantined its tables (each a committed folder)."""
    published = committed_run_file(root, PUBLISHED_AREA, run_date, run_id, "percentiles.csv")
    return (
        published is not None
        or committed_run_file(root, QUARANTINE_AREA, run_date, run_id, "validation.json") is not None
    )


def _finished_at(root: LakePath, run_date: str, run_id: str) -> dt.datetime | None:
    cells = root / "runs" / f"run_date={run_date}" / f"run_id={run_id}" / "cells.parquet"
    if not cells.exists():
        return None
    times = [t for t in read_parquet(cells, ["finished_at"])["finished_at"].to_pylist() if t]
    if not times:
        return None
    parsed = [dt.datetime.fromisoformat(t) for t in times]
    return max(t if t.tzinfo else t.replace(tzinfo=dt.UTC) for t in parsed)


def _listing(run_dir: LakePath, run_id: str, run_date: str, finished_at: str, resumed: bool = False) -> RunToPrune:
    cells = committed_cells(run_dir)
    files = tuple(f for cell in cells for f in raw_sample_files(cell.folder))
    return RunToPrune(run_id, run_date, finished_at, len(cells), files, sum(f.stat().st_size for f in files), resumed)


def raw_sample_files(folder: LakePath) -> list[LakePath]:
    """A committed cell folder's raw sample files (one listing, on S3 too)."""
    return sorted(f for f in folder.iterdir() if any(fnmatch.fnmatchcase(f.name, p) for p in RAW_SAMPLE_PATTERNS))


def prune(lake_root: str | Path | LakePath, plan: PrunePlan, progress: Progress | None = None) -> list[dict]:
    """Remove the planned runs' raw sample files, marker first (see the module's docstring); returns each run's
    final marker."""
    return [prune_run(lake_path(lake_root), run, plan.older_than_days, progress) for run in plan.runs]


def prune_run(root: LakePath, run: RunToPrune, older_than_days: float, progress: Progress | None = None) -> dict:
    path = marker_path(root, run.run_date, run.run_id)
    marker = pruned_marker(root, run.run_date, run.run_id) if run.resumed else None
    if marker is None:
        marker = {
            "schema_version": MARKER_VERSION,
            "state": STATE_PRUNING,
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
            "finished_at": run.finished_at,
            "older_than_days": older_than_days,
            "cells": run.cells,
            "files": len(run.files),
            "bytes": run.bytes,
        }
        write_json(path, marker)
    _remove(run, progress)
    marker = {**marker, "state": STATE_PRUNED, "pruned_at": dt.datetime.now(dt.UTC).isoformat()}
    write_json(path, marker)
    return marker


def _remove(run: RunToPrune, progress: Progress | None, every: int = 100) -> None:
    done = 0
    for done, file in enumerate(run.files, 1):
        file.unlink(missing_ok=True)
        if progress is not None and done % every == 0:
            progress(run, done)
    if progress is not None:
        progress(run, done)
