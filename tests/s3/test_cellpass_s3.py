"""The cell pass on an S3 lake (moto's server): the cells of tests/spark/test_cellpass.py landed in a bucket as
landing leaves them, the bucket's keys and endpoint only in the lake's Airflow connection, and the run analysed
by both routes in a process of its own (tests/s3/routes_job.py). The run takes the cell pass (the route it
prints); its tasks reach the bucket with what the driver hands them (their environment holds nothing of the
lake); the two routes agree frame for frame; and the secrets reach neither the Spark configuration, nor Spark's
event log, nor anything the process prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pandas as pd
import pytest

from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import S3Path
from tests.s3.conftest import upload_run
from tests.s3.routes_job import FRAMES
from tests.spark.test_cellpass import FRAMES as FRAME_KEYS
from tests.spark.test_cellpass import RUN, land_cells, same_frames

# No cell runs here (the cells are written as landing writes them): the test runs beside the cell part, as
# tests/spark/test_cellpass.py does, not in its turns on the host lease.
pytestmark = [pytest.mark.alongside, pytest.mark.spark, pytest.mark.usefixtures("no_orphans")]
REPO = Path(__file__).resolve().parents[2]
ACCESS_KEY = "cellpass-user-Lk8"
SECRET = "cellpass-secret-Wq4zT"
TOKEN = "cellpass-token-Rm3vB"
LEDGER_KEYS = {"producers": ["unit", "producer_id"], "accounting": ["unit"]}


def _environment(endpoint: str) -> dict[str, str]:
    """This process' environment without AWS variables, the lake's connection holding the keys and endpoint."""
    connection = {
        "conn_type": "aws",
        "login": ACCESS_KEY,
        "password": SECRET,
        "extra": {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_session_token": TOKEN},
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "SIXNINES_LAKE_CONN_ID"}
    pythonpath = os.pathsep.join([str(REPO), str(REPO / "plugins"), env.get("PYTHONPATH", "")])
    return {**env, "AIRFLOW_CONN_SIXNINES_LAKE_S3": json.dumps(connection), "PYTHONPATH": pythonpath}


@pytest.fixture(scope="module")
def routes(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Both routes' frames (the folder routes_job wrote) and everything the process printed."""
    work = tmp_path_factory.mktemp("cellpass-s3")
    bucket = "sixnines-cellpass-s3"
    client = boto3.client(
        "s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    client.create_bucket(Bucket=bucket)
    lake = S3Path(f"{bucket}/lake", S3Settings(ACCESS_KEY, SECRET, TOKEN, s3_endpoint, "us-east-1"))
    land_cells(work / "local")
    (work / "staging").mkdir()
    upload_run(work / "local", lake, RUN, work / "staging")
    out, events = work / "out", work / "events"
    out.mkdir()
    events.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tests.s3.routes_job", str(lake), RUN.run_id, str(out), str(events)],
        env=_environment(s3_endpoint),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    printed = done.stdout + done.stderr
    assert done.returncode == 0, printed[-4000:]
    return out, printed


def _frame(out: Path, route: str, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{route}-{name}.parquet")


def test_an_s3_run_takes_the_cell_pass(routes: tuple[Path, str]) -> None:
    _, printed = routes
    assert "analysis: 7 units by the cell pass (tasks reading s3a:// with pyarrow)\n" in printed
    assert "Spark SQL passes" not in printed


@pytest.mark.parametrize("name", [*FRAMES, *LEDGER_KEYS])
def test_the_cell_pass_on_s3_equals_the_spark_sql_passes(routes: tuple[Path, str], name: str) -> None:
    out, _ = routes
    cells, spark_sql = _frame(out, "cells", name), _frame(out, "sql", name)
    assert len(cells) > 0
    keys = {**FRAME_KEYS, **LEDGER_KEYS}[name]
    if name in LEDGER_KEYS:
        cells, spark_sql = cells.astype(str), spark_sql.astype(str)
    same_frames(cells, spark_sql, keys)


def test_no_secret_reaches_the_spark_conf_the_event_log_or_the_output(routes: tuple[Path, str]) -> None:
    out, printed = routes
    conf = (out / "conf.json").read_text()
    assert "fs.s3a.endpoint" in conf  # the settings that are not secret are there
    logs = [p.read_text(errors="replace") for p in (out.parent / "events").rglob("*") if p.is_file()]
    assert logs, "Spark wrote no event log"
    for secret in (SECRET, TOKEN):
        assert secret not in conf
        assert secret not in printed
        assert not [log for log in logs if secret in log]
