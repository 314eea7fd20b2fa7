"""The sweep DAG on an S3 lake, through `airflow dags test` (SQLite, in-process): `SIXNINES_LAKE=s3://…` and the
bucket's credentials and endpoint only in the Airflow connection `sixnines_lake_s3` (no AWS variables in the
environment), so landing, the Spark tail (SparkSubmitOperator with the s3a jars), the regression check and
the report all reach moto's server through the Amazon provider's connection."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bench_tasks.lake.storage import COMMIT_MARKER, S3Path, committed_folder, read_parquet
from tests.airflow_project import REPO, airflow, airflow_project, migrate
from tests.s3.conftest import keys

# a whole sweep with Spark and the GX gate: about 7 minutes on two shared cores, more under load
pytestmark = [
    pytest.mark.integration,
    pytest.mark.spark,
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.timeout(1500),
]
TINY = """
name: itest_s3
description: one tiny core NATS cell
schedule: "0 2 * * *"
systems:
  - system: nats
    versions: [latest]
    broker: {mode: core}
workload:
  message_size_bytes: 256
  rate_per_s: 500
  warmup_s: 0.5
  measure_s: 1
  cooldown_s: 0.5
  drain_timeout_s: 2
measurements: [e2e]
"""


def test_sweep_dag_on_s3_through_the_connection(
    s3_lake: S3Path, s3_env: dict[str, str], s3_client, tmp_path: Path
) -> None:
    connection = {
        "conn_type": "aws",
        "login": s3_env["AWS_ACCESS_KEY_ID"],
        "password": s3_env["AWS_SECRET_ACCESS_KEY"],
        "extra": {"endpoint_url": s3_env["AWS_ENDPOINT_URL"], "region_name": "us-east-1"},
    }
    root = tmp_path / "project"
    env = airflow_project(
        root,
        {"itest_s3": TINY},
        lake=str(s3_lake),
        cache=os.environ.get("SIXNINES_CACHE", str(REPO / ".cache")),
        spark_master="local[1]",
        drop_prefixes=("AWS_",),  # the bucket's credentials and endpoint only in the connection
        extra_env={"AIRFLOW_CONN_SIXNINES_LAKE_S3": json.dumps(connection)},
    )
    migrate(env)
    done = airflow(env, "dags", "test", "sixnines_itest_s3", "2026-02-02", timeout=1400)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-5000:]
    assert "credentials retrieved from login and password" in log  # the Amazon provider read the connection

    runs = keys(s3_client, s3_lake, "runs/run_date=2026-02-02/")
    assert len(runs) == 1 and runs[0].endswith("/cells.parquet"), runs
    (row,) = read_parquet(s3_lake / runs[0]).to_pylist()
    assert row["status"] == "ok" and row["received"] == row["scheduled"] == 500, row
    part = runs[0].removeprefix("runs/").removesuffix("/cells.parquet")
    everything = keys(s3_client, s3_lake)
    assert f"raw/{part}/cell_id={row['cell_id']}/{COMMIT_MARKER}" in everything
    assert f"tables/percentiles/{part}/{COMMIT_MARKER}" in everything
    assert f"published/{part}/{COMMIT_MARKER}" in everything  # committed whole, as one attempt
    published = committed_folder(s3_lake / "published" / part)
    assert published is not None and f"{published.relative_to(s3_lake)}/percentiles.md" in everything
    run_date, run_id = (p.split("=", 1)[1] for p in part.split("/"))
    assert f"history/percentiles/{run_date}__{run_id}.parquet" in everything
    report = (s3_lake / "reports" / part / "report.html").read_text()
    assert row["cell_id"] in report
    assert f"report: {s3_lake}/reports/{part}/report.html" in log  # where results landed, as an s3 URI
    assert "no regression check" in log or "series checked" in log  # the detector read the history from S3
    assert not (root / "lake").exists()
