"""The lake's layout and its atomic writes (DESIGN.md, "Data model").

raw/run_date=D/run_id=R/cell_id=C/{sent-p*,received-c*}.parquet, cell.hlog, result.json
raw/run_date=D/run_id=R/cell_id=C/repeat=K/…  the same, once per repeat, for a cell the matrix repeats
runs/run_date=D/run_id=R/cells.parquet — one row per cell (per repeat of a repeated cell)

A cell is written into a staging folder and renamed into place when complete, so a reader never sees half
a cell; a re-run replaces the cell's folder and its row instead of adding to them. On S3 (bench_tasks.lake.storage)
the staging folder is local (under the cache) and is uploaded under the cell's prefix as one attempt that
becomes visible when its commit marker is written; `committed_cells` is how readers find what is visible.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa

from ..paths import cache_dir
from ..secrecy import scrubbed
from .records import SCHEMA_VERSION, write_parquet
from .storage import (
    LakePath,
    S3Path,
    commit_folder,
    committed_file,
    committed_folder,
    lake_path,
    read_parquet,
    write_text,
)

CELLS_SCHEMA = pa.schema(
    [
        ("schema_version", pa.int32()),
        ("run_id", pa.string()),
        ("run_date", pa.string()),
        ("matrix", pa.string()),
        ("cell_id", pa.string()),
        ("series_key", pa.string()),
        ("repeat", pa.int32()),  # 1…repeats; files written before repeats existed lack both (read as 1 of 1)
        ("repeats", pa.int32()),
        ("system", pa.string()),
        ("version", pa.string()),
        ("measurement", pa.string()),
        ("label", pa.string()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("started_at", pa.string()),
        ("finished_at", pa.string()),
        ("t0_ns", pa.int64()),
        ("measure_start_ns", pa.int64()),
        ("measure_end_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("scheduled", pa.int64()),
        ("sent", pa.int64()),
        ("acknowledged", pa.int64()),
        ("received", pa.int64()),
        ("lost", pa.int64()),
        ("duplicated", pa.int64()),
        # What the cell's system says of its messages (System.acked_metric, System.delivery_guaranteed), for the
        # Spark analysis; cells tables written before these existed lack both (spark_jobs.lakeio asks the system)
        ("acked_metric", pa.string()),
        ("delivery_guaranteed", pa.bool_()),
        # System.promises_no_acknowledged_loss: the gate refuses a fault that cost an acknowledged message
        ("durable_acks", pa.bool_()),
        ("spec_json", pa.string()),
        ("context_json", pa.string()),
        ("results_json", pa.string()),
        ("faults_json", pa.string()),
    ],
    metadata={b"sixnines.schema_version": str(SCHEMA_VERSION).encode()},
)


# The published percentile rows of every run, one flat file per run named so that sorting the names orders
# the runs by date (written by spark_jobs.publish, read by the regression detector); the capacity rows of the
# runs that searched capacity likewise, in their own folder.
HISTORY_DIR = Path("history") / "percentiles"
CAPACITY_HISTORY_DIR = Path("history") / "capacity"


def history_file(lake_root: str | Path | S3Path, run_date: str, run_id: str, area: Path = HISTORY_DIR) -> LakePath:
    return lake_path(lake_root) / area / f"{run_date}__{run_id}.parquet"


def history_files(lake_root: str | Path | S3Path, area: Path = HISTORY_DIR) -> list[LakePath]:
    """Every run's history file, oldest run date first; temporary files (`.name.tmp`) never match."""
    found = (lake_path(lake_root) / area).glob("*__*.parquet")
    return sorted(p for p in found if not p.name.startswith("."))


# What the analysis writes per run, each a folder committed whole (bench_tasks.lake.storage.write_folder):
# published/run_date=D/run_id=R/   the tables that passed the gate (spark_jobs.publish)
# quarantine/run_date=D/run_id=R/  the tables that failed it, with validation.json
# regressions/run_date=D/run_id=R/ the regression check's change_points.parquet and alerts.json
PUBLISHED_AREA = "published"
QUARANTINE_AREA = "quarantine"
REGRESSIONS_AREA = "regressions"


def run_output_dir(lake_root: str | Path | S3Path, area: str, run_date: str, run_id: str) -> LakePath:
    """The folder one of a run's outputs is committed as (on S3 a prefix holding the marker and attempts;
    read it through `committed_run_file`)."""
    return lake_path(lake_root) / area / f"run_date={run_date}" / f"run_id={run_id}"


def committed_run_file(
    lake_root: str | Path | S3Path, area: str, run_date: str, run_id: str, name: str
) -> LakePath | None:
    """File `name` of a run's committed output folder, or None when the folder was never committed (or was
    withdrawn, or is still being written) or lacks the file."""
    return committed_file(run_output_dir(lake_root, area, run_date, run_id), name)


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    run_date: str

    @classmethod
    def new(cls) -> RunInfo:
        now = dt.datetime.now(dt.UTC)
        return cls(run_id=f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}", run_date=f"{now:%Y-%m-%d}")


class Lake:
    """The lake at `root`: a local folder, or `s3://bucket/prefix` (bench_tasks.lake.storage)."""

    def __init__(self, root: str | Path | S3Path):
        self.root: LakePath = lake_path(root)

    def run_dir(self, run: RunInfo) -> LakePath:
        return self.root / "raw" / f"run_date={run.run_date}" / f"run_id={run.run_id}"

    def cell_dir(self, run: RunInfo, cell_id: str, repeat: int | None = None) -> LakePath:
        """`repeat` None: a cell run once (no repeat folder); else the folder of that repeat."""
        folder = self.run_dir(run) / f"cell_id={cell_id}"
        return folder if repeat is None else folder / f"repeat={repeat}"

    def cells_path(self, run: RunInfo) -> LakePath:
        return self.root / "runs" / f"run_date={run.run_date}" / f"run_id={run.run_id}" / "cells.parquet"

    def staging_dir(self, run: RunInfo, instance: str) -> Path:
        """A local folder the generator writes the cell into: inside the lake for a local lake (so the commit is
        a rename), under the cache for an S3 lake (uploaded at commit). `instance`: the cell id, or for one
        repeat of a repeated cell its instance name (matrix.Cell.instance)."""
        if isinstance(self.root, S3Path):
            path = cache_dir() / "lake-staging" / run.run_id / instance
        else:
            path = self.root / ".staging" / run.run_id / instance
        if path.exists():
            shutil.rmtree(path)  # leftovers of a failed attempt: the new attempt starts clean
        path.mkdir(parents=True)
        return path

    def hosts_dir(self, run: RunInfo, key: str) -> LakePath:
        """Where the generators of a cell split over real hosts meet and leave their samples (`rendezvous`):
        in the lake, the one place every host reaches; hidden like staging, and removed once the cell landed.
        `key`: the cell's Airflow TaskGroup, or its instance for the CLI."""
        return self.root / ".hosts" / run.run_id / key

    def commit_cell(self, run: RunInfo, cell_id: str, staging: Path, repeat: int | None = None) -> LakePath:
        """Make a finished staging folder the cell's (repeat's) data atomically, replacing an earlier attempt;
        returns the folder that holds its files (on S3 the committed attempt under the cell's prefix)."""
        return commit_folder(staging, self.cell_dir(run, cell_id, repeat))

    def committed_cell_dir(self, run: RunInfo, cell_id: str, repeat: int | None = None) -> LakePath | None:
        """The cell's (repeat's) files if it was committed, else None."""
        return committed_folder(self.cell_dir(run, cell_id, repeat))

    def upsert_cell_row(self, run: RunInfo, row: dict[str, Any]) -> None:
        """Replace this cell's (repeat's) row in the run's cells table (atomically), keeping the other rows."""
        path = self.cells_path(run)
        rows = read_parquet(path).to_pylist() if path.exists() else []
        row = {"repeat": 1, "repeats": 1, **row}  # a cell run once
        rows = [{"repeat": 1, "repeats": 1, **r} for r in rows]  # a table written before repeats existed
        rows = [r for r in rows if (r["cell_id"], r["repeat"]) != (row["cell_id"], row["repeat"])] + [row]
        write_parquet(pa.Table.from_pylist(rows, schema=CELLS_SCHEMA), path)


class CommittedCell(NamedTuple):
    """One committed run of a cell: its id, which repeat (1 for a cell run once) and the folder of its files."""

    cell_id: str
    repeat: int
    folder: LakePath


def committed_cells(run_dir: LakePath) -> list[CommittedCell]:
    """Every committed cell (every committed repeat of a repeated cell) of a run's raw folder, by cell id and
    repeat; a cell still being written (a local staging folder, an S3 attempt without its marker) is not
    among them. A repeated cell's folder holds only `repeat=K` folders, each committed on its own."""
    out = []
    for folder in run_dir.glob("cell_id=*"):
        cell_id = folder.name.removeprefix("cell_id=")
        repeats = sorted(folder.glob("repeat=*"))
        if not repeats:
            files = committed_folder(folder)
            if files is not None:
                out.append(CommittedCell(cell_id, 1, files))
            continue
        for repeat_folder in repeats:
            files = committed_folder(repeat_folder)
            if files is not None:
                out.append(CommittedCell(cell_id, int(repeat_folder.name.removeprefix("repeat=")), files))
    return sorted(out, key=lambda c: (c.cell_id, c.repeat))


def write_json(path: LakePath, payload: Any) -> None:
    """Replace a JSON file atomically (rename locally, one PUT on S3), without any secret this process knows
    (`secrecy.scrubbed`: a record's strings, before they are JSON-escaped)."""
    write_text(path, json.dumps(scrubbed(payload), indent=2, sort_keys=True, default=str))
