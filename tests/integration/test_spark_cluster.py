"""The sweep's analysis on a real Spark standalone cluster: a master and a worker from the pyspark wheel on
loopback, the pipeline submitted by the very `SparkSubmitOperator` the sweep's tail builds, through a
`spark://` connection. The tables it writes must hold exactly what the harness's own numpy analysis of the
same raw samples says, the run must be published, and the master must list the application as completed
with the worker having run its executor. The master and worker JVMs map the driver's class-data archive (they
load the same jars), and the executor is launched with it."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench_tasks import PERCENTILES, Lake
from spark_jobs.exact import percentile_column
from spark_jobs.launch import driver_archive
from tests.spark.synth import SynthCell, write_run
from tests.spark_cluster import StandaloneCluster, standalone_cluster

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# No cell runs here, but a Spark cluster beside the parallel part's Spark tests slowed them more than it saved
# (clean run: parallel part 248 s → 333 s, this test 41 → 54 s): it stays in the serial part.
pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("no_orphans")]


@pytest.fixture
def airflow_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Airflow's configuration in a throwaway home (unless a DAG test already set one: it is read once, at
    import), the plugins importable as Airflow imports them, spark-submit and spark-class on PATH."""
    if "airflow" not in sys.modules:
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")


def _settled(cluster: StandaloneCluster, timeout_s: float = 30.0) -> dict:
    """The master's status once no application is active (the driver unregisters as its JVM exits)."""
    deadline = time.monotonic() + timeout_s
    state = cluster.state()
    while state["activeapps"] and time.monotonic() < deadline:
        time.sleep(0.5)
        state = cluster.state()
    return state


@pytest.mark.usefixtures("airflow_env")
def test_analysis_runs_on_a_standalone_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sixnines_airflow import tail  # after airflow_env: importing Airflow reads its configuration

    cells = [SynthCell("core0"), SynthCell("js0", mode="jetstream", producers=2, seed=1)]
    lake = tmp_path / "lake"
    run = write_run(lake, cells)

    with standalone_cluster(tmp_path / "spark", workers=1, cores=2, memory="1g") as cluster:
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", cluster.master_url)  # spark://127.0.0.1:<port>
        monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver too binds loopback only
        monkeypatch.setenv("SIXNINES_LAKE", str(lake))  # what the operator resolves the lake from at run time
        operator = tail.analysis()
        assert operator._get_hook()._connection["master"] == cluster.master_url
        # the sweep templates these from the `tables` task's XCom; the values are what that renders to
        operator.application_args = ["--lake", str(lake), "--run-id", run.run_id]
        operator.execute(context={})
        state = _settled(cluster)
        archive = driver_archive()  # `make class-data` made it: the daemons start from it like the driver
        assert archive is not None and archive.is_file(), f"no {archive}: `make class-data` makes it"
        for daemon in cluster.daemons:
            assert str(archive) in Path(f"/proc/{daemon.popen.pid}/maps").read_text(), daemon.name

    # it ran on the cluster: the master saw the application finish, the worker ran its executor
    assert [app["state"] for app in state["completedapps"]] == ["FINISHED"], state["completedapps"]
    assert state["activeapps"] == []
    app_id = state["completedapps"][0]["id"]
    (work,) = cluster.work_dirs
    executors = list((work / app_id).glob("*/stderr"))
    assert executors, f"no executor of {app_id} under {work}"
    assert any("Successfully registered with driver" in p.read_text(errors="replace") for p in executors)
    assert all(f"-XX:SharedArchiveFile={archive}" in p.read_text(errors="replace") for p in executors)

    # the tables are right: every count and percentile equals the harness's numpy analysis of the raw samples
    table = pq.read_table(lake / "tables" / "percentiles" / f"run_date={run.run_date}" / f"run_id={run.run_id}")
    rows = {(r["cell_id"], r["metric"], r["basis"]): r for r in table.to_pylist() if r["leader"] is None}
    landed = pq.read_table(Lake(lake).cells_path(run)).to_pylist()  # each row carries the harness's analysis
    analysis = {r["cell_id"]: json.loads(r["results_json"])["metrics"] for r in landed}
    compared = 0
    for cell in cells:
        for metric, by_basis in analysis[cell.cell_id].items():
            for basis, want in by_basis.items():
                got = rows[(cell.cell_id, metric, basis)]
                assert (got["count"], got["min_ns"], got["max_ns"]) == (want["count"], want["min_ns"], want["max_ns"])
                for p in PERCENTILES:
                    assert got[percentile_column(p)] == want["percentiles_ns"][p], (cell.cell_id, metric, basis, p)
                compared += 1
    assert compared == len(rows) == 6  # core e2e × 2 bases; jetstream e2e and publish × 2 bases
    assert any((lake / "published").rglob("percentiles.csv")), "the gate passed but nothing was published"
