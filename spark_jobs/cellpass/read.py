"""A cell's raw files streamed by a Python task: a few columns at a time, in batches of at most BATCH_ROWS rows,
each column as int64 numpy values beside a validity mask. The files are local paths or `s3a://` objects of an S3
lake, which the task first copies to its local disk (local_copies)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench_tasks.lake.s3conf import S3Settings, StorageError
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
# Rows per batch: a batch and its temporaries hold ~150 bytes a row (a 10 M-message cell peaked 56 MiB lower at
# 2^16 than at 2^18 rows, in the same CPU time); tests set a handful to cross batch edges.
BATCH_ROWS = 1 << 16


@dataclass(frozen=True)
class Col:
    """An integer column: `values` (int64, nulls as 0) and `valid` (False where null)."""

    values: np.ndarray
    valid: np.ndarray

    def take(self, rows: np.ndarray) -> Col:
        return Col(self.values[rows], self.valid[rows])


Columns = dict[str, Col]


def _col(array: pa.Array) -> Col:
    if array.type == pa.string():  # only its nulls matter (the phase: the gate counts missing ones)
        return Col(np.zeros(len(array), np.int64), array.is_valid().to_numpy(zero_copy_only=False))
    if array.null_count == 0:
        return Col(array.cast(pa.int64()).to_numpy(), np.ones(len(array), bool))
    values = pc.fill_null(array, 0).cast(pa.int64()).to_numpy()
    return Col(values, array.is_valid().to_numpy(zero_copy_only=False))


def local_copies(uris: Sequence[str], reach: S3Settings | None, folder: Path) -> dict[str, str]:
    """Each uri → a local path to read: itself where local; an `s3a://` object copied into `folder`, streamed
    to disk (never whole in memory), one GET per object. A task reads its files once per pass; the copy spares
    each pass its own requests, and the task's memory the objects' bytes."""
    out: dict[str, str] = {}
    for i, uri in enumerate(uris):
        path = lake_path(uri, reach)
        if not isinstance(path, S3Path):
            out[uri] = str(path)
            continue
        target = folder / f"{i}-{path.name}"
        try:
            with path.fs.open_input_stream(path.key) as source, target.open("wb") as sink:
                shutil.copyfileobj(source, sink, 1 << 20)
        except FileNotFoundError:
            raise
        except OSError as exc:  # the object named, as S3Path.read_bytes names it
            raise StorageError(f"{path}: cannot copy to {target}: {exc}") from exc
        out[uri] = str(target)
    return out


def batches(paths: Sequence[str], columns: Sequence[str], rows: int = 0) -> Iterator[Columns]:
    """The rows of local `paths` in file order, `columns` only, as Columns of at most `rows` (BATCH_ROWS) rows.
    A column a file's schema version lacks (relay times before version 2) is null there; a null producer_id is
    NULL_PRODUCER, so it can key groups."""
    for path in paths:
        parquet = pq.ParquetFile(path)
        have = [c for c in columns if c in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(rows or BATCH_ROWS, columns=have, use_threads=False):
            out = {name: _col(batch.column(name)) for name in have}
            for name in columns:
                if name not in out:
                    out[name] = Col(np.zeros(batch.num_rows, np.int64), np.zeros(batch.num_rows, bool))
            if "producer_id" in out:
                producer = out["producer_id"]
                out["producer_id"] = Col(
                    np.where(producer.valid, producer.values, NULL_PRODUCER), np.ones(batch.num_rows, bool)
                )
            yield out
