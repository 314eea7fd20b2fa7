"""The driver's side of the cell pass: one task per cell over the raw files lakeio.read_raw listed, and their
results assembled into the Analysis the tables are built from."""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd
from pyspark.sql import Row, SparkSession
from pyspark.sql.types import BooleanType, DoubleType, IntegerType, LongType, StructField, StructType

from spark_jobs import ledger as ledger_pass
from spark_jobs.analysis import SUMMARY_SCHEMA, Analysis, analyze
from spark_jobs.exact import PARTIALS
from spark_jobs.lakeio import Raw, RawFile
from spark_jobs.levels import DONE, DONE_COLUMNS, WHOLE, WHOLE_COLUMNS
from spark_jobs.localdata import typed
from spark_jobs.samples import Units

from .facts import UnitWork
from .ledger import PRODUCER_COLUMNS
from .read import NULL_PRODUCER
from .task import CellResult, run_cell

_LONG = LongType()
SUMS_SCHEMA = StructType(
    [
        StructField("kind", IntegerType()),
        StructField("unit", _LONG),
        StructField("metric", IntegerType()),
        StructField("basis", IntegerType()),
        StructField("leader", IntegerType()),
        StructField("measure", BooleanType()),
        StructField("sec", _LONG),
        StructField("bucket", IntegerType()),
        *[StructField(name, _LONG) for name in PARTIALS[:-1]],
        StructField("vsq", DoubleType()),
        StructField("cell_ix", _LONG),
    ]
)
PRODUCERS_SCHEMA = StructType(
    [StructField(c, IntegerType() if c == "producer_id" else _LONG) for c in PRODUCER_COLUMNS]
)


def readable(raw: Raw) -> bool:
    """Whether tasks can read the raw files themselves: local paths, and `s3a://` objects (read.open_parquet,
    with pyarrow's S3 filesystem); any other scheme is left to Spark's own readers (the Spark SQL passes)."""
    return all("://" not in f.uri or f.uri.startswith("s3a://") for f in (*raw.sent_files, *raw.received_files))


def cell_works(units: Units, raw: Raw) -> list[list[UnitWork]]:
    """One list of UnitWork per cell with raw files, its repeats in unit order; the largest cells first."""
    files: dict[int, dict[str, list[RawFile]]] = defaultdict(lambda: {"sent": [], "received": []})
    for kind, listed in (("sent", raw.sent_files), ("received", raw.received_files)):
        for f in listed:
            if f.unit is not None:
                files[f.unit][kind].append(f)
    cells: dict[int, list[UnitWork]] = defaultdict(list)
    size: dict[int, int] = defaultdict(int)
    for row in units.rows:
        mine = files.get(row["unit"])
        if mine is None:
            continue
        cells[row["cell_ix"]].append(_work(row, mine))
        size[row["cell_ix"]] += sum(f.size for f in (*mine["sent"], *mine["received"]))
    return [cells[ix] for ix in sorted(cells, key=lambda ix: -size[ix])]


def _work(row: Row, files: dict[str, list[RawFile]]) -> UnitWork:
    """A unit's facts (samples.Units' row) as plain values for its task."""
    return UnitWork(
        unit=row["unit"],
        cell_ix=row["cell_ix"],
        t0_ns=row["t0_ns"],
        measure_start_ns=row["measure_start_ns"],
        measure_end_ns=row["measure_end_ns"],
        acked_code=row["acked_code"],
        received_measured=bool(row["received_measured"]),
        sent_files=tuple(f.uri for f in files["sent"]),
        received_files=tuple(f.uri for f in files["received"]),
    )


def _ledger(producers: pd.DataFrame, units: Units) -> ledger_pass.Ledger:
    ids = producers["producer_id"].to_numpy(np.int64)
    missing = ids == NULL_PRODUCER
    rows = producers.assign(producer_id=pd.arrays.IntegerArray(np.where(missing, 0, ids).astype(np.int32), missing))
    checks = ledger_pass.producer_checks(typed(rows, PRODUCERS_SCHEMA), units)
    return ledger_pass.Ledger(ledger_pass.unit_accounting(checks, units), checks, None, 0)


def analyze_cells(spark: SparkSession, raw: Raw, batch_rows: int = 0) -> Analysis:
    """The Analysis of `raw` (readable) by one task per cell, each streaming its files in batches of
    `batch_rows` rows (0: read.BATCH_ROWS)."""
    units = Units.of(raw.cells)
    works = cell_works(units, raw)
    results: list[CellResult] = []
    if works:
        # The lake's settings ride in the task's function, as s3a's keys ride in the Hadoop configuration Spark
        # ships with a scan: never in the Spark conf, and not in the data, which parallelize spools through a
        # file on the driver's disk (docs/lake.md, "The lake on S3", says what a cluster's executors need).
        task = partial(run_cell, reach=raw.reach, batch_rows=batch_rows)
        results = spark.sparkContext.parallelize(works, len(works)).map(task).collect()
    producers = pd.concat([r.producers for r in results], ignore_index=True) if results else _empty(PRODUCER_COLUMNS)
    sums = pd.concat([r.sums for r in results], ignore_index=True) if results else _empty(SUMS_SCHEMA.names)
    summary = pd.concat([r.summary for r in results], ignore_index=True) if results else None
    cell_ix = np.array([row["cell_ix"] for row in units.rows], dtype=np.int64)
    sums["cell_ix"] = cell_ix[sums["unit"].to_numpy(np.int64)] if len(sums) else pd.Series(dtype=np.int64)
    whole = sums[(sums["kind"] == WHOLE) & (sums["measure"] == True)]  # noqa: E712 (nullable)
    done = sums[sums["kind"] == DONE]
    return Analysis(
        units,
        _ledger(producers, units),
        typed(summary if summary is not None else _empty(SUMMARY_SCHEMA.names), SUMMARY_SCHEMA),
        measured=_frame(whole, [*WHOLE_COLUMNS, "cell_ix", *PARTIALS]),
        done=_frame(done, [*DONE_COLUMNS, "n"]),
    )


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    """No rows (a run without raw files); object columns, which Arrow converts to any type, lists included."""
    return pd.DataFrame({c: pd.Series([], dtype=object) for c in columns})


def _frame(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return typed(rows, StructType([SUMS_SCHEMA[c] for c in columns]))


def analyze_raw(spark: SparkSession, raw: Raw) -> Analysis:
    """The analysis of `raw`: by one Python task per cell where the tasks can read its files (`readable`: a
    local lake or one on S3), whatever a cell's size (a task streams its files: task.run_cell), else by the
    Spark SQL passes (spark_jobs.analysis). The two agree to the row (tests/spark/test_cellpass.py, and on S3
    tests/s3/test_cellpass_s3.py). The route taken is printed (`route_line`)."""
    tasked = readable(raw)
    units = len(_units(raw))
    print(route_line(raw, units if tasked else 0, 0 if tasked else units), file=sys.stderr, flush=True)
    return analyze_cells(spark, raw) if tasked else analyze(raw.sent, raw.received, raw.cells)


def _units(raw: Raw) -> set[int]:
    return {f.unit for f in (*raw.sent_files, *raw.received_files) if f.unit is not None}


def route_line(raw: Raw, tasked: int, passed: int) -> str:
    """What analyze_raw says of its route: how many units the cell pass read (and from where), how many went
    through the Spark SQL passes (files tasks cannot open)."""
    where = "s3a:// with pyarrow" if raw.reach is not None else "local files"
    line = f"analysis: {tasked} units by the cell pass (tasks reading {where})"
    if not passed:
        return line
    return f"{line}, {passed} units by the Spark SQL passes (files tasks cannot open)"
