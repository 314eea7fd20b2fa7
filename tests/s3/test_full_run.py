"""A whole run on an S3 lake (moto's server over loopback): a real core-NATS cell landed into
`s3://bucket/lake`, the Spark pipeline (a fresh `sixnines analyze` process, so its JVM starts with the s3a jars;
its cell pass reads the raw files with pyarrow) writing tables, history and the published tables to the bucket,
the regression detector reading that history, and the HTML report written back to the bucket. Nothing of the
lake touches the local disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from bench_tasks import Lake, RunInfo, run_cell
from bench_tasks.lake.layout import REGRESSIONS_AREA, committed_run_file, history_files
from bench_tasks.lake.storage import COMMIT_MARKER, S3Path, committed_folder, read_parquet
from bench_tasks.regressions import detect, write_results
from bench_tasks.report import build_run_report
from tests.integration.helpers import make_cell, seed_history
from tests.s3.conftest import keys

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.usefixtures("no_orphans")]
BIN = Path(sys.executable).parent


def test_full_run_on_s3(
    s3_lake: S3Path,
    s3_env: dict[str, str],
    s3_client,
    console: Console,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # anything written to a relative local path would show up here
    cell = make_cell("e2e", broker={"mode": "core"}, rate_per_s=500, measure_s=1)
    run = RunInfo(run_id="s3run", run_date="2026-02-01")

    # Landing: the cell's files under its prefix, visible through the commit marker.
    report = run_cell(cell, Lake(str(s3_lake)), run, console)
    assert report.status == "ok", report.reason
    assert isinstance(report.path, S3Path) and str(report.path).startswith(f"{s3_lake}/raw/run_date=2026-02-01/")
    raw = keys(s3_client, s3_lake, "raw/")
    cell_prefix = f"raw/run_date=2026-02-01/run_id=s3run/cell_id={cell.id}/"
    assert cell_prefix + COMMIT_MARKER in raw
    landed = {k.rsplit("/", 1)[-1] for k in raw}
    assert {"sent-p0.parquet", "received-c0.parquet", "result.json", "cell.hlog", "broker.log"} <= landed
    assert keys(s3_client, s3_lake, "runs/") == ["runs/run_date=2026-02-01/run_id=s3run/cells.parquet"]

    # Spark: percentiles, timeline, histogram, the gate, publish and history, all through s3a://.
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    done = subprocess.run(
        [str(BIN / "sixnines"), "analyze", "s3run", "--lake", str(s3_lake), "--master", "local[1]"],
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "analysis: 1 units by the cell pass (tasks reading s3a:// with pyarrow)" in done.stderr  # not the SQL passes
    assert f"{s3_lake}/published/run_date=2026-02-01/run_id=s3run" in done.stdout
    tables = keys(s3_client, s3_lake, "tables/")
    for table in ("percentiles", "accounting", "timeline", "histogram"):
        assert f"tables/{table}/run_date=2026-02-01/run_id=s3run/{COMMIT_MARKER}" in tables, tables
    assert not any("_temporary" in k for k in tables)
    published_dir = s3_lake / "published" / "run_date=2026-02-01" / "run_id=s3run"
    attempt = committed_folder(published_dir)  # the published tables: one attempt, committed by its marker
    assert attempt is not None and attempt.name in done.stdout.replace("\n", "")  # where `analyze` published
    assert keys(s3_client, s3_lake, "published/") == [
        f"published/run_date=2026-02-01/run_id=s3run/{COMMIT_MARKER}",
        f"published/run_date=2026-02-01/run_id=s3run/{attempt.name}/percentiles.csv",
        f"published/run_date=2026-02-01/run_id=s3run/{attempt.name}/percentiles.md",
    ]
    (history,) = history_files(s3_lake)
    published = read_parquet(history)
    overall = {(r["metric"], r["basis"]): r for r in published.to_pylist() if r["leader"] is None}
    want = report.analysis.metrics["e2e"]["intended"]
    assert overall[("e2e", "intended")]["count"] == want.count == 500
    assert overall[("e2e", "intended")]["p99_ns"] == want.percentiles["99"]  # Spark's exact percentile

    # Regressions: the detector reads the history from the bucket; four calm earlier nights make today a rise.
    seed_history(s3_lake, published, [(f"2020-01-0{n}", f"past-{n}") for n in range(1, 5)])
    result = detect(s3_lake, run_id="s3run")
    assert result.series_checked > 0 and result.alerts, result.to_dict()
    assert all(a.change.run_id == "s3run" and a.change.relative_change > 0.5 for a in result.alerts)
    folder = write_results(s3_lake, result)
    assert str(folder.parent) == f"{s3_lake}/regressions/run_date=2026-02-01/run_id=s3run"
    assert committed_run_file(s3_lake, REGRESSIONS_AREA, "2026-02-01", "s3run", "alerts.json") == folder / "alerts.json"
    cli = subprocess.run(
        [str(BIN / "sixnines"), "regressions", "--lake", str(s3_lake), "--run-id", "s3run", "--no-write"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 4, cli.stdout + cli.stderr  # 4: at least one alert

    # The report: recomputed from the raw cell in the bucket, with the Spark tables and the alerts, written back.
    path = build_run_report(s3_lake, "s3run")
    assert str(path) == f"{s3_lake}/reports/run_date=2026-02-01/run_id=s3run/report.html"
    html = path.read_text()
    assert cell.id in html and "regression" in html.lower() and "<svg" in html
    assert list(tmp_path.iterdir()) == [], "nothing of the lake may land on the local disk"
