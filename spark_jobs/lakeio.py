"""The jobs' I/O edge: read a run's raw samples and cells table from the lake, write tables atomically.

Layout (DESIGN.md, "Data model"; bench_tasks.lake.layout writes the raw side):
  raw/run_date=D/run_id=R/cell_id=C/{sent-p*,received-c*}.parquet            a cell run once (repeat 1)
  raw/run_date=D/run_id=R/cell_id=C/repeat=K/{sent-p*,received-c*}.parquet   repeat K of a repeated cell
  runs/run_date=D/run_id=R/cells.parquet
  tables/<table>/run_date=D/run_id=R/part-*.parquet          (written here)
A table partition is written under a hidden staging name and renamed into place (bench_tasks.lake.storage's
`commit_folder`), so a reader never sees half of it and a re-run replaces it instead of adding to it. On an S3
lake (`s3://bucket/prefix`, read and written as `s3a://`) there is no rename: a partition is written as one
attempt under its folder and committed by the marker that names it (bench_tasks.lake.storage), and raw cells are
read only where their marker says.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench_tasks import CELLS_SCHEMA, RECEIVED_SCHEMA, SENT_SCHEMA, read_schema_version
from bench_tasks.lake.layout import committed_cells
from bench_tasks.lake.storage import (
    LakePath,
    S3Path,
    commit_folder,
    committed_folder,
    lake_path,
    local_staging,
    mark_committed,
    new_attempt,
    spark_uri,
)

from .errors import AnalyticsError

# Raw schema versions these readers understand (bench_tasks.records.SCHEMA_VERSION history); a column a
# version 1 file lacks (the relay times of version 2) is read as null.
SUPPORTED_RAW_VERSIONS = frozenset({1, 2})

_SPARK_TYPES = {pa.int8(): "tinyint", pa.int32(): "int", pa.int64(): "bigint", pa.string(): "string"}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark DDL of one of the harness's Arrow schemas, so an empty input still has typed columns."""
    return ", ".join(f"`{f.name}` {_SPARK_TYPES[f.type]}" for f in schema)


@dataclass(frozen=True)
class RunRef:
    """One run in the lake: its id and the date partition it was landed under."""

    run_id: str
    run_date: str


Lake = str | Path | S3Path  # what the jobs accept as a lake root (bench_tasks.lake.storage.lake_path)


def find_run(lake: Lake, run_id: str) -> RunRef:
    """Locate a run by id alone: its date is only known from the folder it landed in."""
    hits = sorted((lake_path(lake) / "runs").glob(f"run_date=*/run_id={run_id}/cells.parquet"))
    if not hits:
        raise AnalyticsError(f"run {run_id}: no runs/run_date=*/run_id={run_id}/cells.parquet under {lake}")
    if len(hits) > 1:
        raise AnalyticsError(f"run {run_id}: landed under several dates: {[str(h.parent.parent) for h in hits]}")
    return RunRef(run_id, hits[0].parent.parent.name.removeprefix("run_date="))


def raw_dir(lake: Lake, run: RunRef) -> LakePath:
    return lake_path(lake) / "raw" / f"run_date={run.run_date}" / f"run_id={run.run_id}"


def cells_path(lake: Lake, run: RunRef) -> LakePath:
    return lake_path(lake) / "runs" / f"run_date={run.run_date}" / f"run_id={run.run_id}" / "cells.parquet"


def table_dir(lake: Lake, table: str, run: RunRef) -> LakePath:
    return lake_path(lake) / "tables" / table / f"run_date={run.run_date}" / f"run_id={run.run_id}"


def _check_versions(files: list[LakePath]) -> None:
    """Refuse files written by a schema this reader does not know (STYLE 5) instead of misreading them."""
    for path in files:
        version = read_schema_version(path)
        if version not in SUPPORTED_RAW_VERSIONS:
            raise AnalyticsError(
                f"{path}: raw schema version {version}; this job reads {sorted(SUPPORTED_RAW_VERSIONS)}"
            )


def _read_raw(spark: SparkSession, lake: Lake, runs: list[RunRef], pattern: str, schema: pa.Schema) -> DataFrame:
    """Rows of every committed cell (every repeat of a repeated cell) of `runs`. Each cell folder is read on its
    own, its identity added from the lake's layout (bench_tasks.lake.layout.committed_cells): the folders of cells run
    once and of repeats lie at different depths, and on S3 inside commit attempts, which partition discovery
    cannot mix. A cell run once is repeat 1."""
    frames = []
    for run in runs:
        for cell in committed_cells(raw_dir(lake, run)):
            files = sorted(cell.folder.glob(pattern))
            if not files:
                continue
            _check_versions(files)
            df = spark.read.option("mergeSchema", "true").parquet(*[spark_uri(f) for f in files])
            frames.append(
                df.select(
                    F.lit(run.run_id).alias("run_id"),
                    F.lit(cell.cell_id).alias("cell_id"),
                    F.lit(cell.repeat).cast("int").alias("repeat"),
                    *[
                        (F.col(f.name) if f.name in df.columns else F.lit(None))
                        .cast(_SPARK_TYPES[f.type])
                        .alias(f.name)
                        for f in schema
                    ],
                )
            )
    if not frames:
        return spark.createDataFrame([], f"run_id string, cell_id string, repeat int, {spark_ddl(schema)}")
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def read_sent(spark: SparkSession, lake: Lake, runs: list[RunRef]) -> DataFrame:
    """Every producer's sent rows of `runs`, with run_id and cell_id."""
    return _read_raw(spark, lake, runs, "sent-p*.parquet", SENT_SCHEMA)


def read_received(spark: SparkSession, lake: Lake, runs: list[RunRef]) -> DataFrame:
    """Every consumer's received rows of `runs`, with run_id and cell_id."""
    return _read_raw(spark, lake, runs, "received-c*.parquet", RECEIVED_SCHEMA)


# Cells-table columns a table written by an older harness lacks, and the value they mean there.
_CELLS_DEFAULTS = {"repeat": 1, "repeats": 1}


def read_cells(spark: SparkSession, lake: Lake, runs: list[RunRef]) -> DataFrame:
    """The runs' cells tables (one row per cell, or per repeat of a repeated cell: spec, status, phase
    boundaries, counts, context)."""
    frames = []
    for run in runs:
        frame = spark.read.parquet(spark_uri(cells_path(lake, run)))
        for name, value in _CELLS_DEFAULTS.items():
            if name not in frame.columns:
                frame = frame.withColumn(name, F.lit(value))
        frames.append(frame)
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out.select(*[F.col(f.name).cast(_SPARK_TYPES[f.type]) for f in CELLS_SCHEMA])


@dataclass
class Raw:
    """A set of runs' raw inputs, read once and shared by the jobs of one pipeline run."""

    runs: list[RunRef]
    sent: DataFrame
    received: DataFrame
    cells: DataFrame

    def cache(self) -> Raw:
        """Keep the inputs in memory (spilling to disk) while several jobs read them."""
        self.sent, self.received, self.cells = self.sent.cache(), self.received.cache(), self.cells.cache()
        return self

    def unpersist(self) -> None:
        for frame in (self.sent, self.received, self.cells):
            frame.unpersist()


def read_raw(spark: SparkSession, lake: Lake, run_ids: list[str]) -> Raw:
    runs = [find_run(lake, r) for r in run_ids]
    return Raw(runs, read_sent(spark, lake, runs), read_received(spark, lake, runs), read_cells(spark, lake, runs))


def write_table(df: DataFrame, lake: Lake, table: str, run: RunRef) -> LakePath:
    """Write one run's partition of `table`, replacing an earlier one atomically (rename into place; on S3
    the marker naming the new attempt). Returns the folder holding the part files."""
    final = table_dir(lake, table, run)
    if isinstance(final, S3Path):
        attempt, token = new_attempt(final)
        df.coalesce(1).write.mode("overwrite").parquet(spark_uri(attempt))
        return mark_committed(final, token)
    staging = local_staging(final)
    try:
        df.coalesce(1).write.mode("overwrite").parquet(str(staging))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return commit_folder(staging, final)


def read_table(spark: SparkSession, lake: Lake, table: str, runs: list[RunRef]) -> DataFrame:
    """A table's partitions for `runs` (as written by write_table; on S3 their committed attempts)."""
    folders = {str(table_dir(lake, table, run)): committed_folder(table_dir(lake, table, run)) for run in runs}
    missing = [name for name, folder in folders.items() if folder is None]
    if missing:
        raise AnalyticsError(f"table {table}: not computed yet for {missing}; run the {table} job first")
    return spark.read.parquet(*[spark_uri(f) for f in folders.values() if f is not None])
