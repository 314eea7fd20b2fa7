"""A real `airflow dags test` of a tiny NATS sweep (SQLite, in-process), with the failure path: the first
cell's broker is killed mid-measure. That cell must end failed and landed, its teardown must have run, no
broker or generator may survive, the second cell must still run and land, and the notifier must have
written its record. The run is stamped with the logical date it was given, as a backfill's runs are."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from spark_jobs.launch import FIRST_TIER_ONLY, JVM_OPTIONS
from tests.airflow_project import airflow, airflow_project, migrate

TINY = """
name: itest_airflow
description: two tiny core NATS cells
schedule: "0 2 * * *"
systems:
  - system: nats
    versions: [latest]
    broker: {mode: core}
workload:
  message_size_bytes: 256
  rate_per_s: 500
  warmup_s: 1
  measure_s: 4
  cooldown_s: 0.5
  drain_timeout_s: 2
measurements: [e2e]
axes:
  workload.producers: [1, 2]
"""
SEARCH = """
name: itest_capacity
description: a capacity search of one tiny core NATS cell, bounded to two steps
capacity: {objectives: ["e2e p99 < 1s"], max_rate_per_s: 1000}
systems:
  - system: nats
    versions: [latest]
    broker: {mode: core}
workload: {message_size_bytes: 256, rate_per_s: 500, warmup_s: 0.5, measure_s: 1, cooldown_s: 0.5}
measurements: [e2e]
"""


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A project folder with the DAG files and the tiny matrix, and a migrated SQLite Airflow home for it."""
    root = tmp_path_factory.mktemp("airflow-project")
    env = airflow_project(root, {"itest_airflow": TINY, "itest_capacity": SEARCH})
    migrate(env)
    return env


def _kill_broker_mid_measure(cache: Path, group: str, killed: list[int], stop: threading.Event) -> None:
    """Watch the first cell's status; one second into its measure phase, SIGKILL its nats-server."""
    while not stop.is_set():
        for status_path in cache.glob(f"airflow/*/{group}/status.json"):
            try:
                status = json.loads(status_path.read_text())
                state = json.loads((status_path.parent / "state.json").read_text())
            except (OSError, ValueError):
                continue
            if status.get("phase") == "measure" and status["elapsed_s"] > 2:  # since t0: 1 s of warmup
                pid = int(next(iter(state["brokers"]["nodes"].values())))
                assert "nats-server" in " ".join(psutil.Process(pid).cmdline())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
        time.sleep(0.2)


@pytest.mark.timeout(1500)  # whole sweeps with Spark and the GX gate: minutes each, more under load
def test_dags_test_lands_cells_and_survives_a_killed_broker(airflow_env: dict[str, str], no_orphans: None) -> None:
    root = Path(airflow_env["ROOT"])
    killed: list[int] = []
    stop = threading.Event()
    killer = threading.Thread(
        target=_kill_broker_mid_measure, args=(root / "cache", "c01_nats_core_e2e", killed, stop), daemon=True
    )
    killer.start()
    try:
        kept = {**airflow_env, "SIXNINES_KEEP_WORK": "1"}  # kept on purpose: the cells' work folders are inspected
        done = airflow(kept, "dags", "test", "sixnines_itest_airflow", "2026-01-15", timeout=1400)
    finally:
        stop.set()
        killer.join(5)
    log = done.stdout + done.stderr
    assert killed, "the broker was never killed: " + log[-3000:]
    assert done.returncode != 0, "a run with a failed cell must not exit 0"

    # landed under the logical date given, one row per cell, the killed one failed with its reason
    (cells_path,) = (root / "lake" / "runs" / "run_date=2026-01-15").glob(
        "run_id=sixnines_itest_airflow__*/cells.parquet"
    )
    rows = {r["label"].split(" p")[-1]: r for r in pq.read_table(cells_path).to_pylist()}
    assert len(rows) == 2, rows.keys()
    first, second = sorted(rows.values(), key=lambda r: r["started_at"])
    assert first["status"] == "failed" and "died during measure" in first["reason"], first["reason"]
    assert second["status"] == "ok", second["reason"]
    assert second["received"] == second["scheduled"] == 2000 and second["lost"] == 0
    assert (cells_path.parent.parent.parent.parent / "raw").exists()

    # the second cell's generator was the standby the first cell's land started, claimed by its provision
    (work,) = (root / "cache" / "airflow").glob("sixnines_itest_airflow__*/c01_nats_core_e2e")
    (second_work,) = (p for p in work.parent.glob("c02_*") if p.is_dir())  # not its `.waiting` marker
    assert "standby generator" in (second_work / "generator.log").read_text()

    # the first cell's teardown ran, and nothing of either cell survives
    assert (work / "teardown.json").exists()
    generator = json.loads((work / "generator.json").read_text())["pid"]
    for pid in (*killed, generator):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    survivors = [p.pid for p in psutil.process_iter(["cmdline"]) if str(root) in " ".join(p.info["cmdline"] or ())]
    assert survivors == [], survivors

    # the notifier wrote its record for the failed cell, and only for it: the analysis passed its gate, which
    # judges the cells the harness passed (the failed cell's loss is its failure, already recorded with its reason)
    records = sorted((root / "lake" / "notifications" / "run_date=2026-01-15").glob("run_id=*/*.json"))
    assert [r.name for r in records] == ["c01_nats_core_e2e.json"]
    record = json.loads(records[0].read_text())
    assert record["cell_id"] == first["cell_id"] and "died during measure" in record["reason"]
    assert "sixnines.cell_failed" in log
    assert "work folder of the run: kept: SIXNINES_KEEP_WORK is set" in log

    # the analysis tail printed the landed cells' percentile tables, ran Spark and the gate, published the run
    # with the failed cell marked failed (no series or baseline takes its rows), and wrote the report
    assert "e2e resp" in log and "send lag" in log
    assert f"messages: driver JVM options {JVM_OPTIONS} {FIRST_TIER_ONLY}" in log  # a small run (launch.py)
    run_part = cells_path.parent.relative_to(root / "lake" / "runs")
    assert (root / "lake" / "tables" / "percentiles" / run_part).is_dir()
    assert not (root / "lake" / "quarantine" / run_part).exists()
    assert (root / "lake" / "published" / run_part).is_dir()
    (history,) = (root / "lake" / "history" / "percentiles").glob(f"{run_part.parts[0].split('=')[1]}__*.parquet")
    status = {r["cell_id"]: r["status"] for r in pq.read_table(history, columns=["cell_id", "status"]).to_pylist()}
    assert status == {first["cell_id"]: "failed", second["cell_id"]: "ok"}
    report = (root / "lake" / "reports" / run_part / "report.html").read_text()
    assert first["cell_id"] in report and second["cell_id"] in report and "died during measure" in report


@pytest.mark.timeout(1500)
def test_compare_versions_runs_each_version_and_compares(airflow_env: dict[str, str], no_orphans: None) -> None:
    """Two nats-server releases, the tiny matrix at a quarter of its length: four cells in one lake run, compared by
    series. The older release is fetched into the shared cache once (as the CLI test does)."""
    root = Path(airflow_env["ROOT"])
    conf = {"system": "nats", "versions": ["2.15.1", "2.10.26"], "matrix": "itest_airflow", "phase_scale": 0.25}
    done = airflow(
        {**airflow_env, "SIXNINES_CACHE": os.environ["SIXNINES_CACHE"]},
        *("dags", "test", "sixnines_compare_versions", "2026-01-16", "-c", json.dumps(conf)),
        timeout=1400,
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    (cells_path,) = (root / "lake" / "runs" / "run_date=2026-01-16").glob("run_id=*/cells.parquet")
    rows = pq.read_table(cells_path).to_pylist()
    assert sorted(r["version"] for r in rows) == ["2.10.26", "2.10.26", "2.15.1", "2.15.1"]
    assert {r["status"] for r in rows} == {"ok"}
    # each version reports its own server version, and the two versions of a series pair up
    assert {json.loads(r["context_json"])["broker"]["version"] for r in rows} == {"2.15.1", "2.10.26"}
    assert len({r["series_key"] for r in rows}) == 2
    (out,) = (root / "lake" / "tables" / "comparisons" / "run_date=2026-01-16").glob("run_id=*/versions.json")
    comparison = json.loads(out.read_text())
    assert comparison["versions"] == ["2.15.1", "2.10.26"]
    e2e = [e for e in comparison["entries"] if e["metric"] == "e2e" and e["basis"] == "intended"]
    assert len(e2e) == 2 and all(set(e["versions"]) == {"2.15.1", "2.10.26"} for e in e2e)
    assert all(e["versions"][v]["count"] == 500 for e in e2e for v in e["versions"])
    assert "versions compared (ms)" in log


@pytest.mark.timeout(900)
def test_a_capacity_matrix_is_a_search_dag_that_lands_every_step(airflow_env: dict[str, str], no_orphans: None) -> None:
    """`capacity:` in the matrix: one search task per cell, each step a landed cell of the run, the run's capacity
    page written, and the steps analysed and reported like a sweep's cells."""
    root = Path(airflow_env["ROOT"])
    env = {**airflow_env, "SIXNINES_CACHE": os.environ["SIXNINES_CACHE"]}
    done = airflow(env, "dags", "test", "sixnines_itest_capacity", "2026-01-17", timeout=800)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (page,) = (root / "lake" / "raw" / "run_date=2026-01-17").glob("run_id=*/capacity.json")
    (cell,) = json.loads(page.read_text())["cells"]
    assert [s["rate_per_s"] for s in cell["steps"]] == [500, 1000] and cell["limit"] == "max-rate"
    assert cell["capacity_per_s"] == 1000 and {s["verdict"] for s in cell["steps"]} == {"pass"}
    (cells_path,) = (root / "lake" / "runs" / "run_date=2026-01-17").glob("run_id=*/cells.parquet")
    rows = pq.read_table(cells_path).to_pylist()
    assert sorted(r["cell_id"] for r in rows) == sorted(s["cell_id"] for s in cell["steps"])
    assert (page.parent / "capacity.html").exists()
    (report,) = (root / "lake" / "reports" / "run_date=2026-01-17").glob("run_id=*/report.html")
    assert '<section id="capacity">' in report.read_text()  # the search's charts in the run's report
    (steps,) = (root / "lake" / "published" / "run_date=2026-01-17").glob("run_id=*/capacity_steps.csv")
    assert len(steps.read_text().splitlines()) == 1 + 2  # the Spark table of the steps, published
    (history,) = (root / "lake" / "history" / "capacity").glob("2026-01-17__*.parquet")  # the capacity joins history
    assert pq.read_table(history).to_pylist()[0]["capacity_per_s"] == 1000
    (checked,) = (root / "lake" / "regressions" / "run_date=2026-01-17").glob("run_id=*/alerts.json")
    assert json.loads(checked.read_text())["alerts"] == []  # checked against it: one run holds no regression
