"""The pipeline's tables as files other tools open: CSV (spreadsheets, pandas, anything) and Parquet.

CSV has no lists or maps, so such columns (the percentile table's `unsupported`, a repeat's `*_values`) are
written as JSON text; everything else keeps Arrow's own CSV rendering (integers stay integers, nulls stay
empty). Pure: tables in, bytes out.
"""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq


def _is_nested(field: pa.Field) -> bool:
    return pa.types.is_nested(field.type)


def flatten_for_csv(table: pa.Table) -> pa.Table:
    """Nested columns as JSON strings, so the table fits CSV's rows of scalars."""
    columns = []
    for field, column in zip(table.schema, table.columns, strict=True):
        if _is_nested(field):
            text = [None if v is None else json.dumps(v, default=str) for v in column.to_pylist()]
            columns.append(pa.array(text, pa.string()))
        else:
            columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def csv_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pacsv.write_csv(flatten_for_csv(table), buf)
    return buf.getvalue()


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()
