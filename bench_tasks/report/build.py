"""Building and writing reports: the only module here that writes files.

A report is rendered completely in memory and then written to a temporary name beside its destination and
renamed (on an S3 lake: one PUT), so a browser or a notifier never opens half a report and a rebuild replaces
the old one.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa

from ..lake.runs import report_path as run_report_path
from ..lake.storage import LakePath, lake_path, write_bytes, write_text
from .compare_view import render_compare
from .data import load_run
from .pairing import ReportError
from .run_view import render_run


def compare_report_path(lake_root: str | Path | LakePath, run_a: str, run_b: str) -> LakePath:
    return lake_path(lake_root) / "reports" / "compare" / f"{run_a}__{run_b}" / "report.html"


def write_atomic(path: LakePath, text: str) -> LakePath:
    return write_text(path, text)


def build_run_report(lake_root: str | Path | LakePath, run_id: str, out: Path | None = None) -> LakePath:
    """Render run RUN_ID's report from the raw lake and write it (by default under lake/reports/), with the
    pipeline's tables in full as CSV and Parquet in a folder beside it (written first: no dangling links)."""
    run = load_run(lake_root, run_id)
    path = out or run_report_path(lake_root, run.run_date, run.run_id)
    folder = tables_folder_name(path)
    write_tables(path.parent / folder, run.tables)
    return write_atomic(path, render_run(run, folder))


def tables_folder_name(report: LakePath) -> str:
    """`report.html` → `report-tables`: each report its own folder, even two reports in one directory."""
    return f"{report.name.rsplit('.', 1)[0]}-tables"


def write_tables(folder: LakePath, tables: Mapping[str, pa.Table]) -> None:
    """Each table as `<name>.csv` and `<name>.parquet`, each file replaced atomically (one PUT on S3)."""
    from ..interop.table_files import csv_bytes, parquet_bytes

    for name, table in tables.items():
        write_bytes(folder / f"{name}.csv", csv_bytes(table))
        write_bytes(folder / f"{name}.parquet", parquet_bytes(table))


def find_report(lake_root: str | Path | LakePath, run_id: str) -> LakePath | None:
    """Run RUN_ID's report in the lake (a local path or an S3 object), or None when none was built."""
    from .data import find_run

    try:
        run_date, _ = find_run(lake_root, run_id)
    except ReportError:
        return None
    path = run_report_path(lake_root, run_date, run_id)
    return path if path.exists() else None


def report_uri(lake_root: str | Path | LakePath, run_id: str) -> str | None:
    """Where run RUN_ID's report is, as text (a path or an s3:// URI), or None: what `sixnines runs` lists."""
    path = find_report(lake_root, run_id)
    return None if path is None else str(path)


def build_compare_report(lake_root: str | Path | LakePath, run_a: str, run_b: str, out: Path | None = None) -> LakePath:
    """Render the comparison of two runs, pairing cells by series key (ReportError when none pair)."""
    a, b = load_run(lake_root, run_a), load_run(lake_root, run_b)
    html = render_compare(a, b)
    return write_atomic(out or compare_report_path(lake_root, run_a, run_b), html)
