"""The report's pipeline-tables section over a real run and the real Spark pipeline, rendered in headless
Chromium; and the OMB export checked against Spark's own percentile table of that run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image
from pyspark.sql import SparkSession
from rich.console import Console

from bench_tasks import Lake, RunInfo, run_cell
from bench_tasks.interop.export import export_omb
from bench_tasks.lake.storage import committed_folder
from bench_tasks.report import build_run_report, page
from bench_tasks.report.data import load_run
from bench_tasks.report.tables_view import pipeline_section
from spark_jobs.pipeline import run_analysis
from tests.integration.helpers import make_cell
from tests.integration.test_report import screenshot

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_orphans")]
LINK_BLUE = np.array([0x1F, 0x61, 0x8D])


def _spark_table(lake: Path, name: str, run: RunInfo) -> list[dict]:
    folder = committed_folder(lake / "tables" / name / f"run_date={run.run_date}" / f"run_id={run.run_id}")
    assert folder is not None, f"Spark wrote no {name} table"
    return pq.read_table(folder).to_pylist()


def test_pipeline_section_summarizes_real_tables(spark: SparkSession, tmp_path: Path, console: Console) -> None:
    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    cell = make_cell("e2e", broker={"mode": "jetstream"}, rate_per_s=1000, measure_s=1)
    report = run_cell(cell, lake, run, console)
    assert report.status == "ok", report.reason
    run_analysis(spark, lake.root, run.run_id)

    report = build_run_report(lake.root, run.run_id)
    html = report.read_text()
    tables = load_run(lake.root, run.run_id).tables
    assert {"accounting", "percentiles", "timeline", "histogram"} <= set(tables)
    for name, table in tables.items():
        assert f'href="report-tables/{name}.csv"' in html and f'href="report-tables/{name}.parquet"' in html
        written = pq.read_table(report.parent / "report-tables" / f"{name}.parquet")
        assert written.num_rows == table.num_rows  # the whole table beside the report, not a cut
        assert f"{table.num_rows:,} rows × {table.num_columns} columns" in html
    assert tables["histogram"].num_rows > 100 and html.count(f"run_id</code> = {run.run_id}") >= 4
    assert "gate: passed" in html

    section = tmp_path / "section.html"  # the section alone, with the report's own CSS
    section.write_text(
        page.document(
            "Pipeline tables", run.run_id, [], pipeline_section(load_run(lake.root, run.run_id), "report-tables")
        )
    )
    png = tmp_path / "pipeline-section.png"
    screenshot(section, png, tmp_path / "chromium-profile")
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    ink = float((pixels.min(axis=2) < 235).mean())
    links = int((np.abs(pixels - LINK_BLUE).max(axis=2) < 40).sum())
    print(f"section screenshot {png}: {ink:.1%} ink, {links} link-blue pixels")
    assert ink > 0.03, "the section rendered mostly blank"
    assert links > 500, "the table links did not render"

    _omb_equals_spark(tmp_path, lake, run, cell.id)


def _omb_equals_spark(tmp_path: Path, lake: Lake, run: RunInfo, cell_id: str) -> None:
    """OMB's aggregated end-to-end and publish figures are Spark's percentile rows (service time, all leaders)."""
    export = export_omb(lake.root, run.run_id, tmp_path / "omb")
    omb = json.loads((export.folder / f"{cell_id}.json").read_text())
    rows = {(r["metric"], r["basis"]): r for r in _spark_table(lake.root, "percentiles", run) if r["leader"] is None}
    for prefix, metric in (("aggregatedEndToEndLatency", "e2e"), ("aggregatedPublishLatency", "publish")):
        row = rows[(metric, "sent")]
        assert omb[f"{prefix}50pct"] == row["p50_ns"] / 1e6
        assert omb[f"{prefix}99pct"] == row["p99_ns"] / 1e6
        assert omb[f"{prefix}Max"] == row["max_ns"] / 1e6
        assert omb[f"{prefix}Avg"] == pytest.approx(row["mean_ns"] / 1e6, abs=1e-6)
