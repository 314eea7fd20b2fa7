"""The jobs' I/O edge: read a run's raw samples and cells table from the lake, write tables atomically.

Layout (DESIGN.md, "Data model"; bench_tasks.lake.layout writes the raw side):
  raw/run_date=D/run_id=R/cell_id=C/{sent-p*,received-c*}.parquet            a cell run once (repeat 1)
  raw/run_date=D/run_id=R/cell_id=C/repeat=K/{sent-p*,received-c*}.parquet   repeat K of a repeated cell
  runs/run_date=D/run_id=R/cells.parquet
  tables/<table>/run_date=D/run_id=R/part-*.parquet          (written here)
A table partition (one Parquet file: the tables are small) is written under a hidden staging name and renamed
into place (bench_tasks.lake.storage's `write_folder`), so a reader never sees half of it and a re-run replaces it
instead of adding to it. On an S3 lake (`s3://bucket/prefix`, raw data read as `s3a://` by the cell pass' tasks
with pyarrow, or by Spark) there is no rename: a partition is written as one attempt under its folder and
committed by the marker that names it (bench_tasks.lake.storage), and raw cells are read only where their marker
says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench_tasks import CELLS_SCHEMA, RECEIVED_SCHEMA, SENT_SCHEMA, read_schema_version, system_of
from bench_tasks.lake.layout import committed_cells
from bench_tasks.lake.retention import refuse_if_pruned
from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import (
    LakePath,
    S3Path,
    committed_folder,
    lake_path,
    read_parquet,
    spark_uri,
    write_folder,
)

from .errors import AnalyticsError
from .localdata import rows_frame

# Raw schema versions these readers understand (bench_tasks.lake.records.SCHEMA_VERSION history); a column a
# version 1 file lacks (the relay times of version 2) is read as null.
SUPPORTED_RAW_VERSIONS = frozenset({1, 2})

_SPARK_TYPES = {
    pa.bool_(): "boolean",
    pa.int8(): "tinyint",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.string(): "string",
}


def spark_ddl(schema: pa.Schema) -> str:
    """The Spark DDL of one of the harness's Arrow schemas, so an empty input still has typed columns."""
    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in schema)


def spark_type(kind: pa.DataType) -> str:
    """The Spark SQL type of one of the harness's Arrow column types."""
    return _SPARK_TYPES[kind]


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


Units = dict[tuple[str, str, int], int]  # (run_id, cell_id, repeat) -> unit number (spark_jobs.samples)


@dataclass(frozen=True)
class RawFile:
    """One raw Parquet file and the run × cell × repeat (and unit) its rows belong to."""

    uri: str
    size: int
    run_id: str
    cell_id: str
    repeat: int
    unit: int | None


def raw_files(lake: Lake, runs: list[RunRef], pattern: str, units: Units | None = None) -> list[RawFile]:
    """The files matching `pattern` of every committed cell (every repeat of a repeated cell) of `runs`, with
    their identity from the lake's layout (bench_tasks.lake.layout.committed_cells). A cell run once is repeat
    1. With `units`, folders without a cells row are left out. A run whose raw samples were pruned is refused
    (RawSamplesPruned, naming it): its tables would come out empty or partial."""
    out = []
    for run in runs:
        refuse_if_pruned(lake, run.run_date, run.run_id, "analysing it again")
        for cell in committed_cells(raw_dir(lake, run)):
            files = sorted(cell.folder.glob(pattern))
            unit = None if units is None else units.get((run.run_id, cell.cell_id, cell.repeat))
            if not files or (units is not None and unit is None):
                continue
            _check_versions(files)
            for f in files:
                out.append(RawFile(spark_uri(f), f.stat().st_size, run.run_id, cell.cell_id, cell.repeat, unit))
    return out


def distinct_sizes(files: list[RawFile]) -> list[list[RawFile]]:
    """`files` in as few groups as let no two files of a group share a size (usually one group)."""
    groups: list[list[RawFile]] = []
    for f in files:
        group = next((g for g in groups if all(o.size != f.size for o in g)), None)
        if group is None:
            groups.append(group := [])
        group.append(f)
    return groups


def _read_raw(
    spark: SparkSession, lake: Lake, runs: list[RunRef], pattern: str, schema: pa.Schema, units: Units | None = None
) -> DataFrame:
    """Rows of every committed cell (raw_files) of `runs`, with run_id, cell_id, repeat (and, given `units`, the
    unit number as `unit`)."""
    return raw_frame(spark, raw_files(lake, runs, pattern, units), schema, units is not None)


def raw_frame(spark: SparkSession, files: list[RawFile], schema: pa.Schema, with_unit: bool) -> DataFrame:
    """The rows of `files` with run_id, cell_id, repeat (and `unit`). All the files are read by one scan (one
    per group of distinct_sizes): each row's file is known by its size (`_metadata.file_size`, a constant of
    the file's column batch), which one broadcast join on a long maps to the file's identity. A union of a
    scan per cell folder instead gave every cell its own generated code (its literals differed), compiled and
    warmed up by the JVM once per cell and pass: seconds per run. The folders of cells run once and of repeats
    lie at different depths, and on S3 inside commit attempts, which partition discovery cannot mix."""
    unit_ddl = "unit long, " if with_unit else ""
    ddl = f"run_id string, cell_id string, repeat int, {unit_ddl}{spark_ddl(schema)}"
    if not files:
        return rows_frame(spark, [], ddl)
    frames = []
    for group in distinct_sizes(files):
        identity = [(f.size, f.run_id, f.cell_id, f.repeat, *([f.unit] if with_unit else [])) for f in group]
        index = rows_frame(
            spark, identity, f"_size long, run_id string, cell_id string, repeat int, {unit_ddl}".rstrip(", ")
        )
        # the schema given, not inferred: no Spark job per folder, and a column an older file lacks reads as null
        rows = spark.read.schema(spark_ddl(schema)).parquet(*[f.uri for f in group])
        rows = rows.select("*", F.col("_metadata.file_size").alias("_size")).join(F.broadcast(index), "_size")
        frames.append(rows.select("run_id", "cell_id", "repeat", *(["unit"] if with_unit else []), *schema.names))
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame)
    return out


def read_sent(spark: SparkSession, lake: Lake, runs: list[RunRef], units: Units | None = None) -> DataFrame:
    """Every producer's sent rows of `runs`, with run_id, cell_id, repeat (and unit, given `units`)."""
    return _read_raw(spark, lake, runs, "sent-p*.parquet", SENT_SCHEMA, units)


def read_received(spark: SparkSession, lake: Lake, runs: list[RunRef], units: Units | None = None) -> DataFrame:
    """Every consumer's received rows of `runs`, with run_id, cell_id, repeat (and unit, given `units`)."""
    return _read_raw(spark, lake, runs, "received-c*.parquet", RECEIVED_SCHEMA, units)


# Cells-table columns a table written by an older harness lacks, and the value they mean there.
_CELLS_DEFAULTS = {"repeat": 1, "repeats": 1}


def read_cells(spark: SparkSession, lake: Lake, runs: list[RunRef]) -> DataFrame:
    """The runs' cells tables (cells_table) handed to Spark as local data."""
    return spark.createDataFrame(cells_table(lake, runs), schema=spark_ddl(CELLS_SCHEMA))


def cells_table(lake: Lake, runs: list[RunRef]) -> pa.Table:
    """The runs' cells tables (one row per cell, or per repeat of a repeated cell: spec, status, phase
    boundaries, counts, context), read by the driver (one small file per run)."""
    tables = []
    for run in runs:
        table = read_parquet(cells_path(lake, run))
        for name, value in _CELLS_DEFAULTS.items():
            if name not in table.column_names:
                table = table.append_column(name, pa.array([value] * table.num_rows, pa.int32()))
        columns = [
            table[f.name].cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
            for f in CELLS_SCHEMA
        ]
        tables.append(with_delivery(pa.Table.from_arrays(columns, schema=CELLS_SCHEMA)))
    return pa.concat_tables(tables)


# What the jobs ask of a system, per cells row: what an ack means, whether delivery is guaranteed, and whether a
# fault may cost an acknowledged message (bench_tasks.systems.base.System, by its method's name).
DELIVERY_COLUMNS = {
    "acked_metric": (pa.string(), "acked_metric"),
    "delivery_guaranteed": (pa.bool_(), "delivery_guaranteed"),
    "durable_acks": (pa.bool_(), "promises_no_acknowledged_loss"),
}


def with_delivery(table: pa.Table) -> pa.Table:
    """Cells rows with what their system says of their messages (DELIVERY_COLUMNS), as landing recorded it. A
    row landed before landing recorded a column (null or absent) gets it from its system (bench_tasks.systems),
    asked with the row's spec as landing asks it: so the jobs still read older runs, and the systems' rules stay
    in their packages. `acked_metric` may be null when recorded (no acks), so it is asked again only together
    with `delivery_guaranteed`, as both were recorded together."""
    for name, (kind, _) in DELIVERY_COLUMNS.items():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, kind))
    names, specs = table["system"].to_pylist(), table["spec_json"].to_pylist()
    unrecorded = {name: [v is None for v in table[name].to_pylist()] for name in DELIVERY_COLUMNS}
    unrecorded["acked_metric"] = unrecorded["delivery_guaranteed"]
    for name, (kind, method) in DELIVERY_COLUMNS.items():
        values = table[name].to_pylist()
        for i, missing in enumerate(unrecorded[name]):
            if missing:
                spec = {"system": names[i], **json.loads(specs[i] or "{}")}
                values[i] = getattr(system_of(spec), method)(spec)
        field = pa.field(name, kind)
        table = table.set_column(table.schema.get_field_index(name), field, pa.array(values, kind))
    return table


@dataclass
class Raw:
    """A set of runs' raw inputs, shared by the jobs of one pipeline run: the cells table and the raw files. Their
    rows as Spark frames (`sent`, `received`) are planned on first use: the cell pass (spark_jobs.cellpass)
    reads the files itself and never needs them. Not cached: the Parquet, about 4 bytes a message and in the
    page cache, is cheaper to read again than any copy Spark would keep."""

    runs: list[RunRef]
    cells: DataFrame  # with `unit`, the number its rows carry in sent and received
    sent_files: list[RawFile]  # with `unit`
    received_files: list[RawFile]
    reach: S3Settings | None = field(default=None, repr=False)  # an S3 lake's settings (for the cell pass' tasks)

    @cached_property
    def sent(self) -> DataFrame:
        return raw_frame(self.cells.sparkSession, self.sent_files, SENT_SCHEMA, True)

    @cached_property
    def received(self) -> DataFrame:
        return raw_frame(self.cells.sparkSession, self.received_files, RECEIVED_SCHEMA, True)


def read_raw(spark: SparkSession, lake: Lake, run_ids: list[str]) -> Raw:
    """The runs' cells table (as local data) and raw files, each run × cell × repeat numbered (`unit`) in key
    order."""
    runs = [find_run(lake, r) for r in run_ids]
    cells = read_cells(spark, lake, runs)
    table = cells.toArrow()  # local data: no Spark job
    keys = list(zip(*(table[c].to_pylist() for c in ("run_id", "cell_id", "repeat")), strict=True))
    units: Units = {key: number for number, key in enumerate(sorted(set(keys)))}
    numbers = [units[key] for key in keys]
    numbered = spark.createDataFrame(
        table.append_column("unit", pa.array(numbers, pa.int64())), schema=cells.schema.add("unit", "long")
    )
    sent = raw_files(lake, runs, "sent-p*.parquet", units)
    root = lake_path(lake)
    reach = root.settings if isinstance(root, S3Path) else None
    return Raw(runs, numbered, sent, raw_files(lake, runs, "received-c*.parquet", units), reach)


def _table_folders(lake: Lake, table: str, runs: list[RunRef]) -> list[LakePath]:
    """The folders of a table's partitions for `runs` (as write_arrow wrote them; on S3 their committed
    attempts); AnalyticsError naming any run not computed yet."""
    folders = {str(table_dir(lake, table, run)): committed_folder(table_dir(lake, table, run)) for run in runs}
    missing = [name for name, folder in folders.items() if folder is None]
    if missing:
        raise AnalyticsError(f"table {table}: not computed yet for {missing}; run the {table} job first")
    return [f for f in folders.values() if f is not None]


def read_table(spark: SparkSession, lake: Lake, table: str, runs: list[RunRef]) -> DataFrame:
    """A table's partitions for `runs` as a Spark frame."""
    return spark.read.parquet(*[spark_uri(f) for f in _table_folders(lake, table, runs)])


def table_rows(lake: Lake, table: str, run: RunRef) -> pa.Table:
    """One run's partition of a table, read on the driver (a table is small: no Spark job)."""
    (folder,) = _table_folders(lake, table, [run])
    return read_parquet(folder)


def write_arrow(table: pa.Table, lake: Lake, name: str, run: RunRef) -> LakePath:
    """Write one run's partition of table `name`, replacing an earlier one atomically (bench_tasks.lake.storage
    .write_folder: a rename into place; on S3 the marker naming the new attempt). The tables are small — a row per
    cell, statistic, second or bucket — and built on the driver, so each is one Parquet file: no Spark write job."""
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression="snappy")
    return write_folder(table_dir(lake, name, run), {"part-00000.snappy.parquet": buffer.getvalue().to_pybytes()})


def run_rows(table: pa.Table, run: RunRef) -> pa.Table:
    """The rows of one run in a table collected over several."""
    return table.filter(pc.equal(table["run_id"], run.run_id))


def write_collected(lake: Lake, runs: list[RunRef], tables: dict[str, pa.Table]) -> dict[str, list[LakePath]]:
    """Write each collected table's partition of each run; the written folders by table."""
    return {name: [write_arrow(run_rows(t, run), lake, name, run) for run in runs] for name, t in tables.items()}
