"""Small frames made on the driver as Spark local relations.

`spark.createDataFrame(list_of_rows, schema)` in PySpark classic makes a Python RDD: every job that reads the
frame (each broadcast join with it, each collect) starts tasks that unpickle it in Python workers, 0.1–0.5 s
apiece here. A run's analysis reads dozens of such frames (the units' facts, the located buckets, the
accounting), which made a fixed 5–10 s of every analysis whatever its size. Handed over as Arrow instead, a
frame under `spark.sql.execution.arrow.localRelationThreshold` (48 MB) becomes a LocalRelation: read on the
driver, broadcast without a job.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BooleanType, DataType, IntegralType, StructType, _parse_datatype_string


def rows_frame(spark: SparkSession, rows: Iterable[Sequence[Any]], schema: str | StructType) -> DataFrame:
    """A local relation of `rows` (tuples or Rows, in `schema`'s column order; schema as DDL or StructType)."""
    struct = schema if isinstance(schema, StructType) else _parse_datatype_string(schema)
    if not isinstance(struct, StructType):
        raise TypeError(f"schema: a struct of columns expected, got {schema!r}")
    return spark.createDataFrame(rows_table(rows, to_arrow_schema(struct)), schema=struct)


def rows_table(rows: Iterable[Sequence[Any]], schema: pa.Schema) -> pa.Table:
    """An Arrow table of `rows` (tuples or Rows, in `schema`'s column order)."""
    data = [tuple(row) for row in rows]
    columns = list(zip(*data, strict=True)) if data else [() for _ in schema]
    return pa.Table.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )


def pandas_frame(spark: SparkSession, frame: pd.DataFrame, schema: StructType) -> DataFrame:
    """A local relation of `frame`'s columns that `schema` names, converted to its types through Arrow."""
    table = pa.Table.from_pandas(frame[list(schema.names)], schema=to_arrow_schema(schema), preserve_index=False)
    return spark.createDataFrame(table, schema=schema)


def arrow_table(frame: pd.DataFrame, schema: pa.Schema) -> pa.Table:
    """`frame`'s columns that `schema` names as an Arrow table of exactly that schema: the tables built on the
    driver (percentiles, timeline, histogram, …) are written as they are, so the conversion checks them (a long
    column holding a fraction, or a null in a column declared not null, raises). Without pandas' metadata, so
    readers get the types Spark's tables gave them (a long column with nulls as floats, not pandas' Int64)."""
    table = pa.Table.from_pandas(frame[list(schema.names)], schema=schema, preserve_index=False)
    return table.replace_schema_metadata(schema.metadata)


def typed(frame: pd.DataFrame, schema: StructType) -> pd.DataFrame:
    """`frame` with the columns of `schema`, each converted to its type and back as Spark's toPandas gives it
    (a long column with nulls as floats): both routes of an analysis hand the tables the same dtypes, also when
    a frame has no rows."""
    return arrow_table(frame, to_arrow_schema(schema)).to_pandas()


def literal_array(values: Sequence[bool | int | None], kind: DataType) -> Column:
    """An array literal of integral or boolean `values` (None: null) typed `kind`, made by one py4j call: built
    as F.array of F.lit it took two calls per element, and an analysis builds arrays of a few hundred
    elements (unit facts, envelopes). Spark folds either into the same constant, so the plan is unchanged."""
    if not isinstance(kind, IntegralType | BooleanType):
        raise TypeError(f"literal_array: integral or boolean elements only, got {kind.simpleString()}")
    items = ", ".join(
        "NULL" if v is None else str(bool(v)).lower() if isinstance(v, bool) else str(int(v)) for v in values
    )
    return F.expr(f"CAST(array({items}) AS array<{kind.simpleString()}>)")
