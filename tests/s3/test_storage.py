"""The lake's storage layer against a real S3 protocol server (moto): paths, single-object writes, and the
commit protocol that keeps half-written folders invisible and lets a retry replace its earlier attempt."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from bench_tasks.lake.layout import Lake, RunInfo, committed_cells, history_files, write_json
from bench_tasks.lake.records import read_schema_version, write_parquet
from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import COMMIT_MARKER, S3Path, lake_path, new_attempt, read_parquet, spark_uri, upload
from tests.s3.conftest import keys

RUN = RunInfo(run_id="r1", run_date="2026-01-02")


def _stage(lake: Lake, cell_id: str, marker: str) -> Path:
    """A cell's staging folder as the generator leaves it: Parquet parts and a result."""
    staging = lake.staging_dir(RUN, cell_id)
    write_parquet(pa.table({"seq": [1, 2, 3], "who": [marker] * 3}), staging / "sent-p0.parquet")
    (staging / "result.json").write_text(json.dumps({"cell_id": cell_id, "attempt": marker}))
    return staging


def test_paths_and_single_objects(s3_lake: S3Path, s3_client) -> None:
    """`/`, name, parent, glob and exists behave like pathlib's; a JSON or Parquet file is one object."""
    assert str(s3_lake).startswith("s3://sixnines-") and str(s3_lake).endswith("/lake")
    assert spark_uri(s3_lake / "raw") == f"s3a://{s3_lake.key}/raw"
    target = s3_lake / "notifications" / "a.json"
    assert (target.name, target.parent.name) == ("a.json", "notifications")
    assert not target.exists()
    write_json(target, {"x": 1})
    assert json.loads(target.read_text()) == {"x": 1} and target.is_file() and target.parent.is_dir()
    versioned = pa.table({"a": [1]}).replace_schema_metadata({b"sixnines.schema_version": b"2"})
    write_parquet(versioned, s3_lake / "history" / "percentiles" / "2026-01-01__r0.parquet")
    write_parquet(pa.table({"a": [2]}), s3_lake / "history" / "percentiles" / "2026-01-02__r1.parquet")
    assert [p.name for p in history_files(s3_lake)] == ["2026-01-01__r0.parquet", "2026-01-02__r1.parquet"]
    assert read_parquet(history_files(s3_lake)[1])["a"].to_pylist() == [2]
    assert read_schema_version(history_files(s3_lake)[0]) == 2
    assert keys(s3_client, s3_lake) == [
        "history/percentiles/2026-01-01__r0.parquet",
        "history/percentiles/2026-01-02__r1.parquet",
        "notifications/a.json",
    ]
    assert [p.name for p in s3_lake.glob("*/percentiles/2026-01-0?__*.parquet")] == [
        "2026-01-01__r0.parquet",
        "2026-01-02__r1.parquet",
    ]


def test_half_written_cell_is_invisible_and_a_retry_replaces_the_first_attempt(
    s3_lake: S3Path,
    s3_client,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    lake = Lake(str(s3_lake))
    assert isinstance(lake.root, S3Path)
    staging = _stage(lake, "c1", "first")
    assert staging.is_relative_to(tmp_path / "cache"), "an S3 lake stages locally"

    # A land that died half way through its upload: objects under an attempt, no commit marker.
    half, _ = new_attempt(lake.cell_dir(RUN, "c1"))
    upload(staging / "sent-p0.parquet", half / "sent-p0.parquet")
    assert any(k.endswith("sent-p0.parquet") for k in keys(s3_client, s3_lake, "raw/"))
    assert committed_cells(lake.run_dir(RUN)) == []
    assert lake.committed_cell_dir(RUN, "c1") is None

    # The retried land commits the whole cell; the dead attempt is gone.
    first = lake.commit_cell(RUN, "c1", staging)
    assert not staging.exists()
    assert committed_cells(lake.run_dir(RUN)) == [("c1", 1, first)]
    assert json.loads((first / "result.json").read_text())["attempt"] == "first"
    cell_keys = keys(s3_client, s3_lake, "raw/")
    prefix = f"raw/run_date={RUN.run_date}/run_id={RUN.run_id}/cell_id=c1/"
    assert cell_keys == sorted(
        [prefix + COMMIT_MARKER, f"{prefix}{first.name}/result.json", f"{prefix}{first.name}/sent-p0.parquet"]
    )

    # A re-run of the cell replaces it: one committed attempt, the new one, nothing of the old left.
    second = lake.commit_cell(RUN, "c1", _stage(lake, "c1", "second"))
    assert second != first
    assert committed_cells(lake.run_dir(RUN)) == [("c1", 1, second)]
    assert read_parquet(second / "sent-p0.parquet")["who"].to_pylist() == ["second"] * 3
    assert not any(first.name in k for k in keys(s3_client, s3_lake, "raw/"))

    # The cells table: a row per cell, replaced on re-run, one object.
    lake.upsert_cell_row(RUN, {"cell_id": "c1", "status": "failed"})
    lake.upsert_cell_row(RUN, {"cell_id": "c2", "status": "ok"})
    lake.upsert_cell_row(RUN, {"cell_id": "c1", "status": "ok"})
    rows = read_parquet(lake.cells_path(RUN)).to_pylist()
    assert sorted((r["cell_id"], r["status"]) for r in rows) == [("c1", "ok"), ("c2", "ok")]


def test_local_lake_is_a_plain_path(tmp_path: Path) -> None:
    """A local lake keeps its old layout: the cell folder itself, renamed into place."""
    lake = Lake(tmp_path / "lake")
    assert lake_path(str(tmp_path)) == tmp_path
    staging = _stage(lake, "c1", "first")
    assert staging.parent.parent == tmp_path / "lake" / ".staging"
    final = lake.commit_cell(RUN, "c1", staging)
    assert final == tmp_path / "lake" / "raw" / "run_date=2026-01-02" / "run_id=r1" / "cell_id=c1"
    assert sorted(p.name for p in final.iterdir()) == ["result.json", "sent-p0.parquet"]
    assert committed_cells(lake.run_dir(RUN)) == [("c1", 1, final)]


def test_settings_to_spark_and_environment() -> None:
    """One settings object gives the pyarrow filesystem, s3a's configuration and the subprocess environment;
    secrets never go into the command-line configuration."""
    s = S3Settings("AK", "SK", None, "http://127.0.0.1:9000", "eu-west-1")
    conf = s.spark_conf()
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert "SK" not in conf.values()
    assert s.hadoop_secrets()["fs.s3a.secret.key"] == "SK"
    assert s.environment() == {
        "AWS_ACCESS_KEY_ID": "AK",
        "AWS_SECRET_ACCESS_KEY": "SK",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_DEFAULT_REGION": "eu-west-1",
    }
    assert s.filesystem().region == "eu-west-1"
    assert "SK" not in repr(s)


def test_credentials_from_the_airflow_connection(
    s3_lake: S3Path, s3_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `AIRFLOW_CONN_SIXNINES_LAKE_S3` (how a deployment or `airflow dags test` can define it) and no AWS
    variables, the Amazon provider's hook supplies the keys and the `endpoint_url` extra the endpoint."""
    connection = {
        "conn_type": "aws",
        "login": s3_env["AWS_ACCESS_KEY_ID"],
        "password": s3_env["AWS_SECRET_ACCESS_KEY"],
        "extra": {"endpoint_url": s3_env["AWS_ENDPOINT_URL"], "region_name": "eu-west-1"},
    }
    for key in s3_env:
        monkeypatch.delenv(key)
    monkeypatch.delenv("SIXNINES_LAKE_CONN_ID", raising=False)
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_LAKE_S3", json.dumps(connection))
    lake = lake_path(f"s3://{s3_lake.key}")
    assert isinstance(lake, S3Path)
    assert lake.settings.source == "connection sixnines_lake_s3"
    assert (lake.settings.access_key, lake.settings.endpoint_url, lake.settings.region) == (
        "sixnines-test",
        s3_env["AWS_ENDPOINT_URL"],
        "eu-west-1",
    )
    assert lake.settings.spark_conf()["spark.hadoop.fs.s3a.endpoint"] == s3_env["AWS_ENDPOINT_URL"]
    write_json(lake / "x.json", {"via": "connection"})
    assert json.loads((lake / "x.json").read_text()) == {"via": "connection"}

    # SIXNINES_LAKE_CONN_ID names another connection: that one is used.
    monkeypatch.setenv("SIXNINES_LAKE_CONN_ID", "other_lake")
    monkeypatch.setenv("AIRFLOW_CONN_OTHER_LAKE", json.dumps({**connection, "login": "someone-else"}))
    other = lake_path(f"s3://{s3_lake.key}")
    assert isinstance(other, S3Path) and other.settings.source == "connection other_lake"
    assert other.settings.access_key == "someone-else"
