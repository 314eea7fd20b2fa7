"""Building and writing reports: the only module here that writes files.

A report is rendered completely in memory and then written to a temporary name beside its destination and
renamed, so a browser or a notifier never opens half a report and a rebuild replaces the old one.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from .compare_view import render_compare
from .data import load_run
from .run_view import render_run


def run_report_path(lake_root: Path, run_date: str, run_id: str) -> Path:
    return Path(lake_root) / "reports" / f"run_date={run_date}" / f"run_id={run_id}" / "report.html"


def compare_report_path(lake_root: Path, run_a: str, run_b: str) -> Path:
    return Path(lake_root) / "reports" / "compare" / f"{run_a}__{run_b}" / "report.html"


def write_atomic(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def build_run_report(lake_root: Path, run_id: str, out: Path | None = None) -> Path:
    """Render run RUN_ID's report from the raw lake and write it (by default under lake/reports/)."""
    run = load_run(Path(lake_root), run_id)
    return write_atomic(out or run_report_path(lake_root, run.run_date, run.run_id), render_run(run))


def build_compare_report(lake_root: Path, run_a: str, run_b: str, out: Path | None = None) -> Path:
    """Render the comparison of two runs, pairing cells by series key (ReportError when none pair)."""
    a, b = load_run(Path(lake_root), run_a), load_run(Path(lake_root), run_b)
    html = render_compare(a, b)
    return write_atomic(out or compare_report_path(lake_root, run_a, run_b), html)
