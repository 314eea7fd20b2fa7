"""A real S3 protocol server for the lake-on-S3 tests: moto's server (`moto_server`, from the dev extra) on a
free loopback port, one per test session, and a fresh bucket per test. Credentials and the endpoint reach the
code the way they reach it outside Airflow: the standard AWS environment variables."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from bench_tasks.brokers.ports import free_port
from bench_tasks.lake.layout import Lake, RunInfo, committed_cells
from bench_tasks.lake.storage import S3Path, lake_path, read_parquet, write_parquet_object


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """`moto_server` as a subprocess on 127.0.0.1 (its endpoint URL), stopped (by its pid) at the end."""
    port = free_port()
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen(
        [str(server), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start on port {port} (exit {proc.poll()})") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """One moto server for the test session."""
    with moto_server() as endpoint:
        yield endpoint


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The standard AWS variables pointing at the moto server (also inherited by CLI subprocesses)."""
    env = {
        "AWS_ACCESS_KEY_ID": "sixnines-test",
        "AWS_SECRET_ACCESS_KEY": "sixnines-test-secret",
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    return env


@pytest.fixture
def s3_lake(s3_env: dict[str, str]) -> S3Path:
    """A new bucket for this test, and the lake at a prefix inside it."""
    bucket = f"sixnines-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"], region_name="us-east-1").create_bucket(Bucket=bucket)
    lake = lake_path(f"s3://{bucket}/lake")
    assert isinstance(lake, S3Path)
    return lake


@pytest.fixture
def s3_client(s3_env: dict[str, str]):
    return boto3.client("s3", endpoint_url=s3_env["AWS_ENDPOINT_URL"], region_name="us-east-1")


def keys(client, lake: S3Path, prefix: str = "") -> list[str]:
    """Every object key under the lake (relative to it), straight from the server; pyarrow's empty folder
    markers (`prefix/`, left when a folder's last object is deleted) are not data and are left out."""
    root = lake.key.split("/", 1)[1] + "/"
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=lake.bucket, Prefix=root + prefix)
    found = (o["Key"] for page in pages for o in page.get("Contents", []))
    return sorted(k.removeprefix(root) for k in found if not k.endswith("/"))


def upload_run(local: Path, lake: S3Path, run: RunInfo, staging: Path) -> None:
    """A run of a local lake as landing leaves it on S3: every committed cell (every repeat) one attempt under
    its marker, the cells table one object. `staging`: an empty local folder for the copies uploaded."""
    for cell in committed_cells(Lake(local).run_dir(run)):
        repeat = cell.repeat if cell.folder.name.startswith("repeat=") else None
        copy = staging / f"{cell.cell_id}-{cell.repeat}"
        shutil.copytree(cell.folder, copy)
        Lake(lake).commit_cell(run, cell.cell_id, copy, repeat)
    target = Lake(lake).cells_path(run)
    assert isinstance(target, S3Path)
    write_parquet_object(read_parquet(Lake(local).cells_path(run)), target)
