"""Publishing: human-readable tables (Markdown, CSV), the history the regression detector reads, and the
quarantine for tables that failed the gate. Pure rendering plus atomic writes; no Spark needed past collect.

  published/run_date=D/run_id=R/{percentiles.md, percentiles.csv, repeats.csv, faults.csv}
                                     repeats.csv (cells the matrix repeats): per statistic the min, median,
                                     max across repeats and the % variation; also a section of the .md
                                     faults.csv (runs with faults): the faults table, a row per fault
  history/percentiles/D__R.parquet   the published rows of run R (landed on date D), keyed inside by run_id,
                                     run_date, cell_id, series_key, system, version; re-publishing a run
                                     replaces its one file, so history never holds a run twice. Flat files
                                     (no key=value folders) so readers never see a key twice.
  history/capacity/D__R.parquet      the run's capacity rows (runs that searched capacity), likewise
  quarantine/run_date=D/run_id=R/{percentiles.md, percentiles.csv, faults.csv, validation.json}
A published or quarantined folder appears whole or not at all and a re-publish replaces it
(bench_tasks.lake.storage.write_folder: a rename into place locally; on an S3 lake a new `attempt=…` folder and then
the `_committed.json` marker naming it, which readers resolve with `committed_folder`). Withdrawing one (a
publication the gate now fails, a quarantine the run has left) removes its marker first. The history file is
one object (one PUT on S3, a rename locally).
"""

from __future__ import annotations

import csv
import io
import json
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench_tasks import PERCENTILES
from bench_tasks.lake.layout import (
    CAPACITY_HISTORY_DIR,
    PUBLISHED_AREA,
    QUARANTINE_AREA,
    history_file,
    run_output_dir,
)
from bench_tasks.lake.storage import LakePath, S3Path, withdraw_folder, write_folder, write_parquet_object
from spark_jobs.exact import percentile_column
from spark_jobs.lakeio import Lake, RunRef
from spark_jobs.repeats import STATISTIC_COLUMNS, stat_name, variation_column

NS_PER_MS = 1e6


def _ms(value: Any) -> str:
    return "unsup." if value is None else f"{value / NS_PER_MS:.3f}"


def _variation_md(spread: Sequence[dict[str, Any]]) -> list[str]:
    """A repeated cell's run-to-run variation, JLBH-style: per statistic min / median / max across repeats and
    the % variation (bench_tasks.core.variation)."""
    if not spread:
        return []
    out = [
        f"Run-to-run variation over {spread[0]['repeats']} repeats (ms; % variation as JLBH prints it):",
        "",
        "| metric | basis | statistic | repeats with a value | min | median | max | % variation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(spread, key=lambda r: (r["metric"], r["basis"])):
        for column in STATISTIC_COLUMNS:
            name = stat_name(column)
            if not r[f"{name}_values"]:
                continue
            var = r[variation_column(column)]
            out.append(
                f"| {r['metric']} | {'response' if r['basis'] == 'intended' else 'service'} | {name} | "
                f"{r[f'{name}_values']} | {_ms(r[f'{name}_min_ns'])} | {_ms(r[f'{name}_median_ns'])} | "
                f"{_ms(r[f'{name}_max_ns'])} | {'—' if var is None else f'{var:.2f}'} |"
            )
    return [*out, ""]


def markdown(
    rows: Sequence[dict[str, Any]], accounting: Sequence[dict[str, Any]], spread: Sequence[dict[str, Any]] = ()
) -> str:
    """One section per cell: the percentile table in milliseconds (unsupported shown as `unsup.`, never as a
    number), the message accounting below it and, for a repeated cell, its run-to-run variation."""
    out = ["# Latency percentiles (ms, measure phase)", ""]
    header = ["metric", "basis", "leader", "count", "min", *[f"p{p}" for p in PERCENTILES], "max", "mean"]
    for acc in sorted(accounting, key=lambda a: (a["run_id"], a["label"] or "", a["cell_id"])):
        mine = [r for r in rows if r["run_id"] == acc["run_id"] and r["cell_id"] == acc["cell_id"]]
        out += [f"## {acc['label']} — `{acc['cell_id']}` [{acc['status']}]", ""]
        out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for r in sorted(mine, key=lambda r: (r["metric"], r["basis"], -1 if r["leader"] is None else r["leader"])):
            cells = [
                r["metric"],
                "response" if r["basis"] == "intended" else "service",
                "all" if r["leader"] is None else str(r["leader"]),
                str(r["count"]),
                _ms(r["min_ns"]),
                *[_ms(r[percentile_column(p)]) for p in PERCENTILES],
                _ms(r["max_ns"]),
                _ms(r["mean_ns"]),
            ]
            out.append("| " + " | ".join(cells) + " |")
        counts = ", ".join(
            f"{k.replace('_', ' ')} {acc[k]}"
            for k in ("scheduled", "sent", "acknowledged", "received", "lost", "duplicated", "acknowledged_but_lost")
        )
        repeats = acc.get("repeats") or 1
        out += ["", f"Messages: {counts}" + (f" (all {repeats} repeats)." if repeats > 1 else "."), ""]
        out += _variation_md([r for r in spread if r["run_id"] == acc["run_id"] and r["cell_id"] == acc["cell_id"]])
    return "\n".join(out)


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    """Every column of the percentile table, ns integers; `unsupported` as `;`-joined percentiles."""
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: ";".join(v) if isinstance(v, list) else ("" if v is None else v) for k, v in r.items()})
    return buffer.getvalue()


def _write_folder(final: LakePath, files: dict[str, str]) -> LakePath:
    return write_folder(final, {name: text.encode("utf-8") for name, text in files.items()})


def history_path(lake: Lake, run: RunRef) -> LakePath:
    return history_file(lake, run.run_date, run.run_id)


def capacity_history_path(lake: Lake, run: RunRef) -> LakePath:
    return history_file(lake, run.run_date, run.run_id, CAPACITY_HISTORY_DIR)


def _write_history(path: LakePath, table: pa.Table) -> None:
    """Replace one run's history file whole: a reader sees the old file or the new one, never half of it."""
    if isinstance(path, S3Path):
        write_parquet_object(table, path, compression="zstd")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    pq.write_table(table, staging, compression="zstd")
    os.replace(staging, path)


def _csv_files(tables: Mapping[str, Sequence[dict[str, Any]]] | None) -> dict[str, str]:
    """`<name>.csv` of each table that has rows (a run without faults or searches gets no empty files)."""
    return {f"{name}.csv": to_csv(list(rows)) for name, rows in (tables or {}).items() if rows}


def _run_folder(lake: Lake, area: str, run: RunRef) -> LakePath:
    return run_output_dir(lake, area, run.run_date, run.run_id)


def publish(
    lake: Lake,
    run: RunRef,
    table: pa.Table,
    accounting: list[dict[str, Any]],
    spread: Sequence[dict[str, Any]] = (),
    csv_tables: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> LakePath:
    """Write the published tables and replace this run's partition of the history; an earlier quarantine
    of the run is withdrawn. `csv_tables`: more tables published as `<name>.csv` when they have rows."""
    rows = table.to_pylist()
    files = {"percentiles.md": markdown(rows, accounting, spread), "percentiles.csv": to_csv(rows)}
    if spread:
        files["repeats.csv"] = to_csv(list(spread))
    files |= _csv_files(csv_tables)
    folder = _write_folder(_run_folder(lake, PUBLISHED_AREA, run), files)
    _write_history(history_path(lake, run), table)
    capacity = list((csv_tables or {}).get("capacity") or ())
    if capacity:
        _write_history(capacity_history_path(lake, run), pa.Table.from_pylist(capacity))
    else:
        capacity_history_path(lake, run).unlink(missing_ok=True)
    withdraw_folder(_run_folder(lake, QUARANTINE_AREA, run))
    return folder


def quarantine(
    lake: Lake,
    run: RunRef,
    rows: list[dict[str, Any]],
    accounting: list[dict[str, Any]],
    validation: dict[str, Any],
    spread: Sequence[dict[str, Any]] = (),
    csv_tables: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> LakePath:
    """Keep the tables that failed the gate, with the validation result that failed them. An earlier
    publication of the same run is withdrawn: what the lake holds for it now does not pass. The history file
    goes first and the publication after it (publish writes them the other way round), so the history never
    holds a run whose published folder is not committed, whichever step a crash interrupts."""
    history_path(lake, run).unlink(missing_ok=True)
    capacity_history_path(lake, run).unlink(missing_ok=True)
    withdraw_folder(_run_folder(lake, PUBLISHED_AREA, run))
    files = {
        "percentiles.md": markdown(rows, accounting, spread),
        "percentiles.csv": to_csv(rows),
        "validation.json": json.dumps(validation, indent=2, sort_keys=True, default=str),
    }
    files |= _csv_files(csv_tables)
    return _write_folder(_run_folder(lake, QUARANTINE_AREA, run), files)
