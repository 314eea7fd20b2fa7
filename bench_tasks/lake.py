"""The lake's layout and its atomic writes (DESIGN.md, "Data model").

raw/run_date=D/run_id=R/cell_id=C/{sent-p*,received-c*}.parquet, cell.hlog, result.json
raw/run_date=D/run_id=R/cell_id=C/repeat=K/…  the same, once per repeat, for a cell the matrix repeats
runs/run_date=D/run_id=R/cells.parquet — one row per cell (per repeat of a repeated cell)

A cell is written into a staging folder and renamed into place when complete, so a reader never sees half
a cell; a re-run replaces the cell's folder and its row instead of adding to them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .records import SCHEMA_VERSION, write_parquet

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
        ("spec_json", pa.string()),
        ("context_json", pa.string()),
        ("results_json", pa.string()),
        ("faults_json", pa.string()),
    ],
    metadata={b"sixnines.schema_version": str(SCHEMA_VERSION).encode()},
)


# The published percentile rows of every run, one flat file per run named so that sorting the names orders
# the runs by date (written by spark_jobs.publish, read by the regression detector).
HISTORY_DIR = Path("history") / "percentiles"


def history_file(lake_root: str | Path, run_date: str, run_id: str) -> Path:
    return Path(lake_root) / HISTORY_DIR / f"{run_date}__{run_id}.parquet"


def history_files(lake_root: str | Path) -> list[Path]:
    """Every run's history file, oldest run date first; temporary files (`.name.tmp`) never match."""
    return sorted(p for p in (Path(lake_root) / HISTORY_DIR).glob("*__*.parquet") if not p.name.startswith("."))


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    run_date: str

    @classmethod
    def new(cls) -> RunInfo:
        now = dt.datetime.now(dt.UTC)
        return cls(run_id=f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}", run_date=f"{now:%Y-%m-%d}")


class Lake:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def run_dir(self, run: RunInfo) -> Path:
        return self.root / "raw" / f"run_date={run.run_date}" / f"run_id={run.run_id}"

    def cell_dir(self, run: RunInfo, cell_id: str, repeat: int | None = None) -> Path:
        """`repeat` None: a cell run once (no repeat folder); else the folder of that repeat."""
        folder = self.run_dir(run) / f"cell_id={cell_id}"
        return folder if repeat is None else folder / f"repeat={repeat}"

    def cells_path(self, run: RunInfo) -> Path:
        return self.root / "runs" / f"run_date={run.run_date}" / f"run_id={run.run_id}" / "cells.parquet"

    def staging_dir(self, run: RunInfo, instance: str) -> Path:
        """`instance`: the cell id, or for one repeat of a repeated cell its instance name (matrix.Cell)."""
        path = self.root / ".staging" / run.run_id / instance
        if path.exists():
            shutil.rmtree(path)  # leftovers of a failed attempt: the new attempt starts clean
        path.mkdir(parents=True)
        return path

    def commit_cell(self, run: RunInfo, cell_id: str, staging: Path, repeat: int | None = None) -> Path:
        """Move a finished staging folder into place atomically, replacing an earlier attempt."""
        final = self.cell_dir(run, cell_id, repeat)
        final.parent.mkdir(parents=True, exist_ok=True)
        old = None
        if final.exists():
            old = final.with_name(f".replaced-{final.name}-{secrets.token_hex(3)}")
            os.replace(final, old)
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old)
        return final

    def upsert_cell_row(self, run: RunInfo, row: dict[str, Any]) -> None:
        """Replace this cell's (repeat's) row in the run's cells table (atomically), keeping the other rows."""
        path = self.cells_path(run)
        rows = pq.read_table(path).to_pylist() if path.exists() else []
        rows = [{"repeat": 1, "repeats": 1, **r} for r in rows]  # a table written before repeats existed
        rows = [r for r in rows if (r["cell_id"], r["repeat"]) != (row["cell_id"], row["repeat"])] + [row]
        write_parquet(pa.Table.from_pylist(rows, schema=CELLS_SCHEMA), path)


def write_json(path: Path, payload: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)
