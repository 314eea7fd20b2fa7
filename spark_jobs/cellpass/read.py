"""A cell's raw files read by a Python task: numpy columns beside validity masks, one array per column. The
files are local paths or `s3a://` objects of an S3 lake, which the task fetches with pyarrow's S3 filesystem."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import S3Path, lake_path

SENT_COLUMNS = ("producer_id", "seq", "intended_ns", "sent_ns", "acked_ns", "phase")
RECEIVED_COLUMNS = (
    "producer_id",
    "seq",
    "intended_ns",
    "sent_ns",
    "received_ns",
    "leader",
    "relay_received_ns",
    "relay_sent_ns",
)
NULL_PRODUCER = -(2**31) - 1  # a null producer_id's stand-in: outside int32, so no real producer shares it


@dataclass(frozen=True)
class Col:
    """An integer column: `values` (int64, nulls as 0) and `valid` (False where null)."""

    values: np.ndarray
    valid: np.ndarray

    def take(self, rows: np.ndarray) -> Col:
        return Col(self.values[rows], self.valid[rows])


Columns = dict[str, Col]


def _col(array: pa.ChunkedArray) -> Col:
    if array.type == pa.string():  # only its nulls matter (the phase: the gate counts missing ones)
        return Col(np.zeros(len(array), np.int64), array.is_valid().to_numpy(zero_copy_only=False))
    if array.null_count == 0:
        return Col(array.cast(pa.int64()).to_numpy(), np.ones(len(array), bool))
    values = pc.fill_null(array, 0).cast(pa.int64()).to_numpy()
    return Col(values, array.is_valid().to_numpy(zero_copy_only=False))


def _column(files: Sequence[pq.ParquetFile], name: str) -> pa.ChunkedArray:
    """One column of every file; from a file whose schema version lacks it (relay times before version 2),
    nulls."""
    have = [f.schema_arrow.field(name).type for f in files if name in f.schema_arrow.names]
    kind = have[0] if have else pa.string() if name == "phase" else pa.int64()
    chunks: list[pa.Array] = []
    for f in files:
        if name in f.schema_arrow.names:
            chunks += f.read(columns=[name]).column(0).cast(kind).chunks
        else:
            chunks.append(pa.nulls(f.metadata.num_rows, kind))
    return pa.chunked_array(chunks, kind)


def open_parquet(uri: str, reach: S3Settings | None = None) -> pq.ParquetFile:
    """A raw file as lakeio.raw_files names it: a local path, or an `s3a://` object reached with `reach` (the
    driver's settings for the lake; None: this process's own, s3conf.s3_settings). An object is fetched whole,
    one GET: a cell's files are small (route.CELL_TASK_MAX_RAW_BYTES in all, a few percent of what the task
    holds at its peak), and read in place every column would be a ranged GET of its own."""
    path = lake_path(uri, reach)
    if isinstance(path, S3Path):
        return pq.ParquetFile(pa.BufferReader(path.read_bytes()))
    return pq.ParquetFile(path)


def read_columns(paths: Sequence[str], columns: Sequence[str], reach: S3Settings | None = None) -> Columns:
    """The rows of `paths` (one unit's sent or received files, reached as open_parquet says) as Columns, read
    one column at a time (at most one column is held twice, as Arrow and as numpy). The producer_id's nulls are
    NULL_PRODUCER, so it can key groups."""
    files = [open_parquet(p, reach) for p in paths]
    out = {name: _col(_column(files, name)) for name in columns}
    producer = out["producer_id"]
    out["producer_id"] = Col(
        np.where(producer.valid, producer.values, NULL_PRODUCER), np.ones(len(producer.valid), bool)
    )
    return out
