"""HTML reports of runs and comparisons (issue 6): self-contained files with inline SVG charts.

Pure rendering (spectrum, pairing, charts, page, *_view) with I/O only at the edges (data reads the lake,
build writes the file).
"""

from .build import (
    build_compare_report,
    build_run_report,
    compare_report_path,
    find_report,
    report_uri,
    run_report_path,
    tables_folder_name,
)
from .pairing import ReportError

__all__ = [
    "ReportError",
    "build_compare_report",
    "build_run_report",
    "compare_report_path",
    "find_report",
    "report_uri",
    "run_report_path",
    "tables_folder_name",
]
