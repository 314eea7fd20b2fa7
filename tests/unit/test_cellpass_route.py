"""Which raw files the cell pass' tasks read themselves (spark_jobs.cellpass.route.readable), what the route
says it took, and how a task reaches a file: a local path in place, an `s3a://` object with the settings its
driver handed it, not with its own environment's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench_tasks.lake.s3conf import CONN_ID_ENV, S3Settings
from bench_tasks.lake.storage import S3Path, lake_path
from spark_jobs.cellpass.read import batches, local_copies
from spark_jobs.cellpass.route import readable, route_line
from spark_jobs.lakeio import Raw, RawFile

HANDED = S3Settings("driver-key", "driver-secret", None, "http://127.0.0.1:9", "eu-west-1", "connection lake")


def _raw(*uris: str, reach: S3Settings | None = None) -> Raw:
    files = [RawFile(uri, 10, "r", "c", 1, 0) for uri in uris]
    return Raw([], None, files, [], reach)  # type: ignore[arg-type]  # the cells frame plays no part here


def test_tasks_read_local_and_s3a_files_and_leave_other_schemes_to_spark() -> None:
    assert readable(_raw("/lake/raw/a/sent-p0.parquet"))
    assert readable(_raw("s3a://bucket/lake/raw/a/sent-p0.parquet", reach=HANDED))
    assert not readable(_raw("s3a://bucket/a.parquet", "hdfs://nn/lake/raw/a/sent-p0.parquet"))


def test_the_route_says_where_the_tasks_read_and_what_went_to_the_passes() -> None:
    s3 = _raw("s3a://bucket/a.parquet", reach=HANDED)
    assert route_line(s3, 7, 0) == "analysis: 7 units by the cell pass (tasks reading s3a:// with pyarrow)"
    assert route_line(_raw("/a.parquet"), 5, 0) == "analysis: 5 units by the cell pass (tasks reading local files)"
    other = _raw("hdfs://nn/a.parquet")
    assert route_line(other, 0, 1).endswith("1 units by the Spark SQL passes (files tasks cannot open)")
    assert "driver-secret" not in repr(s3)


def test_a_task_reaches_s3_with_the_settings_it_was_handed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://elsewhere:1")
    monkeypatch.setenv(CONN_ID_ENV, "")  # this process's own settings from its environment, never a connection
    path = lake_path("s3a://bucket/lake/raw/sent-p0.parquet", HANDED)
    assert isinstance(path, S3Path) and path.key == "bucket/lake/raw/sent-p0.parquet"
    assert path.settings is HANDED
    assert lake_path("s3a://bucket/x").settings.endpoint_url == "http://elsewhere:1"  # unhanded: its own


def test_a_local_file_is_read_in_place(tmp_path: Path) -> None:
    pq.write_table(pa.table({"seq": [1, 2]}), tmp_path / "sent-p0.parquet")
    uri = str(tmp_path / "sent-p0.parquet")
    assert local_copies([uri], HANDED, tmp_path / "copies") == {uri: uri}
    assert [b["seq"].values.tolist() for b in batches([uri], ["seq"], rows=1)] == [[1], [2]]
