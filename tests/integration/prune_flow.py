"""The retention check shared by the local and the S3 lake: two real runs of one NATS cell are landed and
analysed, earlier nights are put into the history so the second run is a regression, then both runs' raw samples
are pruned by `sixnines lake prune`, and the second run's report, a compare against the first run and the regression
check must give the numbers they gave before; re-analysis and export must refuse it, naming it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from rich.console import Console

from bench_tasks import Lake, RunInfo, run_cell
from bench_tasks.lake.layout import committed_cells, history_file, history_files
from bench_tasks.lake.retention import RAW_SAMPLE_PATTERNS, STATE_PRUNED, RawSamplesPruned, pruned_marker
from bench_tasks.lake.storage import LakePath, read_parquet
from bench_tasks.regressions import Settings, detect
from bench_tasks.report import build_compare_report, build_run_report

from . import helpers
from .helpers import make_cell

RUN_A = RunInfo(run_id="prune-a", run_date="2026-03-01")
RUN_B = RunInfo(run_id="prune-b", run_date="2026-03-02")
ANALYSE = """
import sys
from spark_jobs.pipeline import run_analysis
from spark_jobs.session import get_spark
spark = get_spark("sixnines-prune-test", "local[1]", lake=sys.argv[1])
try:
    for run_id in sys.argv[2:]:
        print(run_analysis(spark, sys.argv[1], run_id))
finally:
    spark.stop()
"""
TABLE = re.compile(r"<table\b.*?</table>", re.DOTALL)


def sixnines(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, env=dict(os.environ), timeout=600
    )


def land_and_analyse(lake: LakePath, console: Console) -> None:
    """Two runs of one core-NATS e2e cell, analysed in one Spark application (one JVM for both)."""
    cell = make_cell("e2e", broker={"mode": "core"}, rate_per_s=500)
    for run in (RUN_A, RUN_B):
        landed = run_cell(cell, Lake(lake), run, console)
        assert landed.status == "ok", landed.reason
    done = subprocess.run(
        [sys.executable, "-c", ANALYSE, str(lake), RUN_A.run_id, RUN_B.run_id],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]


def seed_history(lake: LakePath) -> None:
    """Nights between run A and run B at half run B's latencies, as many as the regression check's baseline holds,
    so run B is a regression whatever run A measured: A is outside B's baseline (with four nights, a run A slower
    than run B on a noisy host was the baseline's maximum, and B stayed under it). History files sort by date,
    then run id: `2026-03-01__prune-a-N` falls between them."""
    published = read_parquet(history_file(lake, RUN_B.run_date, RUN_B.run_id))
    nights = [(RUN_A.run_date, f"{RUN_A.run_id}-{n}") for n in range(1, Settings().baseline_runs + 1)]
    helpers.seed_history(lake, published, nights)


def numbers(lake: LakePath) -> dict[str, object]:
    """What a user reads of run B: its report's and the compare's tables, and the regression check."""
    report = build_run_report(lake, RUN_B.run_id).read_text()
    compare = build_compare_report(lake, RUN_A.run_id, RUN_B.run_id).read_text()
    return {
        "report": TABLE.findall(report),
        "compare": TABLE.findall(compare),
        "regressions": detect(lake, Settings(), RUN_B.run_id).to_dict(),
    }


def raw_samples(lake: LakePath, run: RunInfo) -> list[str]:
    return [
        f.name for c in committed_cells(Lake(lake).run_dir(run)) for p in RAW_SAMPLE_PATTERNS for f in c.folder.glob(p)
    ]


def prune_and_check(lake: LakePath, console: Console) -> None:
    land_and_analyse(lake, console)
    seed_history(lake)
    before = numbers(lake)
    assert before["regressions"]["alerts"], "the seeded history makes run B a regression"  # type: ignore[index]
    assert len(before["report"]) >= 4 and before["compare"]
    sample_files = raw_samples(lake, RUN_B)
    assert sample_files

    dry = sixnines("lake", "prune", "--older-than-days", "0", "--lake", str(lake), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would prune run {RUN_B.run_id} ({RUN_B.run_date}" in dry.stdout, dry.stdout
    assert raw_samples(lake, RUN_B) == sample_files and pruned_marker(lake, RUN_B.run_date, RUN_B.run_id) is None

    history = [str(p) for p in history_files(lake)]
    pruned = sixnines("lake", "prune", "--older-than-days", "0", "--lake", str(lake))
    assert pruned.returncode == 0, pruned.stderr
    assert f"pruned 2 run(s): {2 * len(sample_files)} files" in pruned.stdout, pruned.stdout
    assert raw_samples(lake, RUN_A) == raw_samples(lake, RUN_B) == []  # both runs are older than 0 days
    marker = pruned_marker(lake, RUN_B.run_date, RUN_B.run_id)
    assert marker is not None and (marker["state"], marker["files"]) == (STATE_PRUNED, len(sample_files))
    assert [str(p) for p in history_files(lake)] == history
    assert all((c.folder / "cell.hlog").exists() for c in committed_cells(Lake(lake).run_dir(RUN_B)))

    after = numbers(lake)
    assert after == before
    page = build_run_report(lake, RUN_B.run_id).read_text()
    assert "raw samples of cell" in page and f"were pruned ({marker['pruned_at']})" in page
    assert 'id="spectrum-' in page and 'id="scatter-' not in page  # spectra through the landed percentiles
    assert 'id="compare-' in build_compare_report(lake, RUN_A.run_id, RUN_B.run_id).read_text()

    again = sixnines("analyze", RUN_B.run_id, "--lake", str(lake))
    said = " ".join(again.stderr.split())  # the console wraps at 120 columns
    assert again.returncode == 2, said
    assert f"run {RUN_B.run_id}: its raw samples were pruned ({marker['pruned_at']}, sixnines lake prune)" in said
    refused = sixnines("export", "hgrm", RUN_B.run_id, "--lake", str(lake))
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "so an .hgrm export (exact, from every sample) is not possible" in said, said
    _refused_by_spark_reader(lake)


def _refused_by_spark_reader(lake: LakePath) -> None:
    """The raw reader every Spark job goes through (Airflow's analysis task too) refuses the pruned run."""
    from spark_jobs.lakeio import RunRef, raw_files

    try:
        raw_files(str(lake), [RunRef(RUN_B.run_id, RUN_B.run_date)], "sent-p*.parquet")
    except RawSamplesPruned as exc:
        assert exc.run_id == RUN_B.run_id
    else:
        raise AssertionError("raw_files read a pruned run")
