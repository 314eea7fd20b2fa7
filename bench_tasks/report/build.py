"""Building and writing reports: the only module here that writes files.

A report is rendered completely in memory and then written to a temporary name beside its destination and
renamed (on an S3 lake: one PUT), so a browser or a notifier never opens half a report and a rebuild replaces
the old one.
"""

from __future__ import annotations

from pathlib import Path

from ..runs import report_path as run_report_path
from ..storage import LakePath, lake_path, write_text
from .compare_view import render_compare
from .data import load_run
from .run_view import render_run


def compare_report_path(lake_root: str | Path | LakePath, run_a: str, run_b: str) -> LakePath:
    return lake_path(lake_root) / "reports" / "compare" / f"{run_a}__{run_b}" / "report.html"


def write_atomic(path: LakePath, text: str) -> LakePath:
    return write_text(path, text)


def build_run_report(lake_root: str | Path | LakePath, run_id: str, out: Path | None = None) -> LakePath:
    """Render run RUN_ID's report from the raw lake and write it (by default under lake/reports/)."""
    run = load_run(lake_root, run_id)
    return write_atomic(out or run_report_path(lake_root, run.run_date, run.run_id), render_run(run))


def build_compare_report(lake_root: str | Path | LakePath, run_a: str, run_b: str, out: Path | None = None) -> LakePath:
    """Render the comparison of two runs, pairing cells by series key (ReportError when none pair)."""
    a, b = load_run(lake_root, run_a), load_run(lake_root, run_b)
    html = render_compare(a, b)
    return write_atomic(out or compare_report_path(lake_root, run_a, run_b), html)
