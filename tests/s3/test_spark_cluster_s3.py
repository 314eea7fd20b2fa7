"""The deployment's shape: a run on an S3 lake (moto's server) analysed on a Spark standalone cluster of two
workers by the `analysis` task's own SparkSubmitOperator, the bucket's keys and endpoint only in the lake's
Airflow connection, held against the same run analysed on a local lake by a local master.

The cluster starts before the test knows the bucket: its master and workers (so their executors and Python
workers) have nothing of the lake in their environment, not even the endpoint, so the executors can reach the
bucket only with what the driver hands the cell pass' tasks (docs/lake.md, "The lake on S3"). The run takes
the cell pass (the route the driver prints), both workers ran tasks, no secret reaches Spark's configuration,
its event log or the output, and every table equals the local analysis' table."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import boto3
import pytest

from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import S3Path, committed_folder
from spark_jobs import lakeio
from tests.s3.conftest import upload_run
from tests.spark.synth import SynthCell, write_run
from tests.spark_cluster import standalone_cluster

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ACCESS_KEY = "cluster-user-Hn5"
SECRET = "cluster-secret-Zq8wK"
TOKEN = "cluster-token-Pb2xR"
CELLS = [
    SynthCell("core0"),
    SynthCell("core1", rate_per_s=1500.0, seed=2),
    SynthCell("js0", mode="jetstream", producers=2, seed=1),
    SynthCell("js1", mode="jetstream", rate_per_s=800.0, seed=3),
]

# Serial (no cell, but a cluster beside the parallel part's Spark tests slows them), and in pyproject.toml's
# `beside_cells`: it waits on its own servers, like tests/integration/test_spark_cluster.py.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.timeout(900),
]


def _tee(lines: Iterable[str], into: list[str]) -> Iterator[str]:
    for line in lines:
        into.append(line)
        yield line


def _analyse(monkeypatch: pytest.MonkeyPatch, master: str, lake: str, run_id: str, events: Path) -> str:
    """The sweep's `analysis` operator run by hand on `master` over `lake`; what the driver printed."""
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from sixnines_airflow import tail  # after the fixture's Airflow home: importing Airflow reads it

    printed: list[str] = []
    original = SparkSubmitHook._process_spark_submit_log
    monkeypatch.setattr(
        SparkSubmitHook, "_process_spark_submit_log", lambda hook, it: original(hook, _tee(it, printed))
    )
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", master)
    monkeypatch.setenv("SIXNINES_LAKE", lake)
    operator = tail.analysis()
    events.mkdir()
    operator.conf = {
        **(operator.conf or {}),
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",  # read as text below
        # every executor registered before the first job, so that both workers take cells
        "spark.scheduler.minRegisteredResourcesRatio": "1.0",
    }
    operator.application_args = ["--lake", lake, "--run-id", run_id]
    operator.execute(context={})
    return "\n".join(printed)


@pytest.fixture
def airflow_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Airflow's configuration in a throwaway home, the plugins importable, spark-submit on PATH, and nothing
    of any S3 lake in the environment (the cluster's daemons inherit it)."""
    if "airflow" not in sys.modules:
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    monkeypatch.syspath_prepend(str(REPO / "plugins"))
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    for name in [n for n in os.environ if n.startswith("AWS_") or n.startswith("AIRFLOW_CONN_SIXNINES_LAKE")]:
        monkeypatch.delenv(name)
    for name in ("SIXNINES_LAKE_CONN_ID", "SIXNINES_LAKE_SPARK_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("airflow_env")
def test_an_s3_run_on_a_two_worker_cluster_equals_the_local_analysis(
    s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "lake"
    run = write_run(local, CELLS)
    local_printed = _analyse(
        monkeypatch, '{"conn_type": "spark", "host": "local[*]"}', str(local), run.run_id, tmp_path / "ev-local"
    )
    assert "analysis: 4 units by the cell pass (tasks reading local files)" in local_printed

    bucket = "sixnines-s3-cluster"
    boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    ).create_bucket(Bucket=bucket)
    lake = S3Path(f"{bucket}/lake", S3Settings(ACCESS_KEY, SECRET, TOKEN, s3_endpoint, "us-east-1"))
    (tmp_path / "staging").mkdir()
    upload_run(local, lake, run, tmp_path / "staging")

    with standalone_cluster(tmp_path / "spark", workers=2, cores=1, memory="1g") as cluster:
        daemons_env = [
            Path(f"/proc/{d.popen.pid}/environ").read_bytes().decode(errors="replace") for d in cluster.daemons
        ]
        connection = {
            "conn_type": "aws",
            "login": ACCESS_KEY,
            "password": SECRET,
            "extra": {"endpoint_url": s3_endpoint, "region_name": "us-east-1", "aws_session_token": TOKEN},
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_LAKE_S3", json.dumps(connection))  # after the daemons started
        events = tmp_path / "ev-cluster"
        printed = _analyse(monkeypatch, cluster.master_url, f"s3://{bucket}/lake", run.run_id, events)
        deadline = time.monotonic() + 30  # the driver unregisters as its JVM exits
        while (state := cluster.state())["activeapps"] and time.monotonic() < deadline:
            time.sleep(0.5)

    # the cell pass, its tasks reading the bucket on both workers' executors
    assert "analysis: 4 units by the cell pass (tasks reading s3a:// with pyarrow)" in printed
    assert "Spark SQL passes" not in printed
    (app,) = state["completedapps"]
    assert app["state"] == "FINISHED"
    ran = []
    for work in cluster.work_dirs:
        logs = [p.read_text(errors="replace") for p in (work / app["id"]).glob("*/stderr")]
        ran.append(any("Running task" in log for log in logs))
    assert ran == [True, True], "a worker's executor ran no task"
    # the daemons (so their executors) knew nothing of the bucket: neither the keys nor where it is
    for environ in daemons_env:
        assert "AWS_" not in environ and SECRET not in environ and s3_endpoint not in environ
    # nor did the Spark conf, the event log or the output carry a secret
    logs = [p.read_text(errors="replace") for p in events.rglob("*") if p.is_file()]
    assert logs and any("fs.s3a.endpoint" in log for log in logs)
    for secret in (SECRET, TOKEN):
        assert secret not in printed
        assert not [log for log in logs if secret in log]
        for work in cluster.work_dirs:  # the executors' own output (their folders also hold the jars they fetched)
            outputs = [*work.glob("*/*/stderr"), *work.glob("*/*/stdout")]
            assert outputs and not [p for p in outputs if secret in p.read_text(errors="replace")]

    # every table of the local analysis, equal on S3; both published
    tables = sorted(p.name for p in (local / "tables").iterdir())
    assert {"accounting", "percentiles", "timeline", "histogram"} <= set(tables), tables
    ref = lakeio.RunRef(run.run_id, run.run_date)
    for name in tables:
        want, got = lakeio.table_rows(local, name, ref), lakeio.table_rows(lake, name, ref)
        assert want.num_rows > 0 or name not in ("accounting", "percentiles"), name
        assert got.equals(want), name
    assert committed_folder(lake / "published" / f"run_date={run.run_date}" / f"run_id={run.run_id}") is not None
    assert any((local / "published").rglob("percentiles.csv"))
