"""A cell's raw files read by a Python task: numpy columns beside validity masks, one array per column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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
    values = pc.fill_null(array, 0).cast(pa.int64()).to_numpy()
    if array.null_count == 0:
        return Col(values, np.ones(len(array), bool))
    return Col(values, array.is_valid().to_numpy(zero_copy_only=False))


def _table(path: str, columns: Sequence[str]) -> pa.Table:
    """`columns` of one file; a column its schema version lacks (relay times before version 2) as nulls."""
    present = set(pq.read_schema(path).names)
    table = pq.read_table(path, columns=[c for c in columns if c in present])
    for name in columns:
        if name not in present:
            kind = pa.string() if name == "phase" else pa.int64()
            table = table.append_column(name, pa.nulls(table.num_rows, kind))
    return table.select(list(columns))


def read_columns(paths: Sequence[str], columns: Sequence[str]) -> Columns:
    """The rows of `paths` (one unit's sent or received files) as Columns. The producer_id's nulls are
    NULL_PRODUCER, so it can key groups."""
    tables = [_table(p, columns) for p in paths]
    if not tables:
        return {c: Col(np.zeros(0, np.int64), np.zeros(0, bool)) for c in columns}
    table = pa.concat_tables(tables, promote_options="permissive")
    out = {name: _col(table.column(name)) for name in columns}
    producer = out["producer_id"]
    out["producer_id"] = Col(np.where(producer.valid, producer.values, NULL_PRODUCER), np.ones(table.num_rows, bool))
    return out
