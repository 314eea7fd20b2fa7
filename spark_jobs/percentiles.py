"""Percentile job: per run × cell × metric × basis (and × leader for Kafka), the whole distribution.

Writes four tables per run (schemas in TABLES.md beside this file):
  tables/accounting/…            one row per cell: every measure-phase message accounted for
  tables/percentiles/…           one row per cell × metric × basis × leader (leader null = all leaders): count,
                                 min, p50 … p99.9999 (exact, null + listed in `unsupported` when the count
                                 cannot support them), max, mean, stddev, plus the cell's accounting
  tables/percentiles_by_repeat/… the overall rows of each repeat of a cell on its own
  tables/repeat_spread/…         per repeated cell × metric × basis: each statistic's min/median/max across
                                 the repeats and its % variation (spark_jobs.repeats)
A cell the matrix repeats is one cell in `accounting` and `percentiles`: its repeats' samples are merged and
the percentiles computed over all of them (never averaged), its counts summed; `repeats` says how many ran and
`<statistic>_variation_pct` how much they disagreed.
Run alone: `spark-submit spark_jobs/percentiles.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis, analyze
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.exact import PERCENTILE_COLUMNS
from spark_jobs.ledger import ACCOUNTING_COLUMNS
from spark_jobs.levels import LEADER, MERGED, REPEAT
from spark_jobs.localdata import arrow_table
from spark_jobs.metrics import LAG, basis_names, metric_names
from spark_jobs.repeats import STATISTIC_COLUMNS, spread_table, variation_column
from spark_jobs.samples import CELL_KEYS, MERGED_KEYS

# Version history of the analytics tables (each table carries it in a `schema_version` column):
#   1 — first version.
#   2 — repeats: `repeats` and `<statistic>_variation_pct` in accounting/percentiles; tables
#       percentiles_by_repeat and repeat_spread; a repeated cell's rows merge its repeats.
TABLES_SCHEMA_VERSION = 2

CELL_COLUMNS = ("run_date", "series_key", "system", "version", "measurement", "label", "status")
TABLES = ("accounting", "percentiles", "percentiles_by_repeat", "repeat_spread")

# The tables' Arrow schemas, as written (TABLES.md).
VERSION_FIELD = pa.field("schema_version", pa.int32(), nullable=False)
KEY_FIELDS = {"run_id": pa.string(), "cell_id": pa.string(), "repeat": pa.int32()}
NAMED_FIELDS = [pa.field("metric", pa.string(), nullable=False), pa.field("basis", pa.string(), nullable=False)]
ACCOUNTING_FIELDS = [pa.field(c, pa.int64()) for c in ACCOUNTING_COLUMNS]
STATISTIC_FIELDS = [
    *(pa.field(c, pa.int64()) for c in ("count", "min_ns", "max_ns")),
    *(pa.field(c, pa.float64()) for c in ("mean_ns", "stddev_ns")),
    *(pa.field(c, pa.int64()) for c in PERCENTILE_COLUMNS),
    pa.field("unsupported", pa.list_(pa.string())),
]


def key_fields(keys: Sequence[str]) -> list[pa.Field]:
    return [pa.field(k, KEY_FIELDS[k]) for k in keys]


def cell_fields(status_known: bool) -> list[pa.Field]:
    """The identity columns; `status` is never null where it is decided over a cell's repeats."""
    return [pa.field(c, pa.string(), nullable=c != "status" or not status_known) for c in CELL_COLUMNS]


REPEATS_FIELD = pa.field("repeats", pa.int32(), nullable=False)
ACCOUNTING_SCHEMA = pa.schema(
    [VERSION_FIELD, *key_fields(MERGED_KEYS), *cell_fields(True), REPEATS_FIELD, *ACCOUNTING_FIELDS]
)
BY_REPEAT_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        *key_fields(CELL_KEYS),
        *cell_fields(False),
        *NAMED_FIELDS,
        pa.field("leader", pa.int32()),
        *STATISTIC_FIELDS,
        *ACCOUNTING_FIELDS,
    ]
)
PERCENTILES_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        *key_fields(MERGED_KEYS),
        *cell_fields(True),
        REPEATS_FIELD,
        *NAMED_FIELDS,
        pa.field("leader", pa.int32()),
        *STATISTIC_FIELDS,
        *ACCOUNTING_FIELDS,
        *(pa.field(variation_column(c), pa.float64()) for c in STATISTIC_COLUMNS),
    ]
)


def merged_facts(facts: pd.DataFrame) -> pd.DataFrame:
    """One row per cell over its repeats: the identity they share, `ok` only when every repeat was ok, and how
    many repeats landed."""
    groups = facts.assign(_ok=facts["status"] == "ok").groupby([*MERGED_KEYS, "cell_ix"], sort=True)
    shared = groups[[c for c in CELL_COLUMNS if c != "status"]].first(skipna=False)
    status = np.where(groups["_ok"].all(), "ok", "failed")
    return shared.assign(status=status, repeats=groups.size().astype(np.int32)).reset_index()


def merged_accounting(acc: pd.DataFrame) -> pd.DataFrame:
    """Per-repeat accounting summed per cell (each repeat's messages are its own: no message counts twice)."""
    return acc.groupby(list(MERGED_KEYS), sort=False)[list(ACCOUNTING_COLUMNS)].sum().reset_index()


def accounting_table(acc: pd.DataFrame, facts: pd.DataFrame) -> pa.Table:
    """The accounting with the cell's identity, one row per cell (also for cells without any sample)."""
    rows = merged_facts(facts).merge(merged_accounting(acc), on=list(MERGED_KEYS))
    return arrow_table(rows.assign(schema_version=TABLES_SCHEMA_VERSION), ACCOUNTING_SCHEMA)


def _level(summary: pd.DataFrame, levels: Sequence[int]) -> pd.DataFrame:
    """Summary rows of some levels (never the internal lag metric), with metric and basis named."""
    rows = summary[summary["level"].isin(levels) & (summary["metric"] != LAG)]
    return rows.assign(metric=metric_names(rows["metric"]), basis=basis_names(rows["basis"]))


def by_repeat_table(summary: pd.DataFrame, acc: pd.DataFrame, facts: pd.DataFrame) -> pa.Table:
    """The overall rows of every repeat of every cell, each with that repeat's own accounting."""
    rows = _level(summary, [REPEAT]).drop(columns=["leader"])
    identity = facts[["unit", *CELL_KEYS, *CELL_COLUMNS]].rename(columns={"unit": "g"})
    table = rows.merge(identity, on="g").merge(acc[[*CELL_KEYS, *ACCOUNTING_COLUMNS]], on=list(CELL_KEYS))
    return arrow_table(table.assign(schema_version=TABLES_SCHEMA_VERSION, leader=None), BY_REPEAT_SCHEMA)


def percentile_table(summary: pd.DataFrame, acc: pd.DataFrame, facts: pd.DataFrame, spread: pa.Table) -> pa.Table:
    """One row per cell × metric × basis × leader over all the cell's repeats, with their variation."""
    rows = _level(summary, [MERGED, LEADER])
    cells = merged_facts(facts).rename(columns={"cell_ix": "g"})
    variations = [variation_column(c) for c in STATISTIC_COLUMNS]
    varied = spread.select([*MERGED_KEYS, "metric", "basis", *variations]).to_pandas()
    table = (
        rows.merge(cells, on="g")
        .merge(merged_accounting(acc), on=list(MERGED_KEYS))
        .merge(varied, on=[*MERGED_KEYS, "metric", "basis"], how="left")
    )
    overall = (table["level"] == MERGED).to_numpy()  # repeats are compared on the overall rows only
    table = table.assign(
        schema_version=TABLES_SCHEMA_VERSION,
        leader=table["leader"].where(~overall),
        **{v: table[v].where(overall) for v in variations},
    )
    return arrow_table(table, PERCENTILES_SCHEMA)


def tables(result: Analysis) -> dict[str, pa.Table]:
    """Every table of `TABLES` from an analysis (measure phase only), built on the driver."""
    acc, facts = result.ledger.accounting, result.facts
    by_repeat = by_repeat_table(result.summary, acc, facts)
    spread = spread_table(by_repeat)
    return {
        "accounting": accounting_table(acc, facts),
        "percentiles": percentile_table(result.summary, acc, facts, spread),
        "percentiles_by_repeat": by_repeat,
        "repeat_spread": spread,
    }


def compute(sent: DataFrame, received: DataFrame, cells: DataFrame) -> tuple[pa.Table, pa.Table]:
    """(accounting table, percentile table) of the cells in `cells`, measure phase only."""
    out = tables(analyze(sent, received, cells))
    return out["accounting"], out["percentiles"]


def run(
    spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None
) -> dict[str, list[Path]]:
    """Compute the tables of the runs (from `raw` when the caller has read it already) and write them per
    run. Returns the written partitions by table."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    return lakeio.write_collected(lake, raw.runs, tables(analyze_raw(spark, raw)))


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    spark = get_spark("sixnines-percentiles", args.master, lake=args.lake)
    for table, paths in run(spark, args.lake, args.run_ids).items():
        for path in paths:
            print(f"{table}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
