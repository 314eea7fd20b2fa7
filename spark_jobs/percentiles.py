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

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis, analyze
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.exact import PERCENTILE_COLUMNS
from spark_jobs.ledger import ACCOUNTING_COLUMNS
from spark_jobs.levels import LEADER, MERGED, REPEAT
from spark_jobs.repeats import STATISTIC_COLUMNS, spread_table, variation_column, variation_columns
from spark_jobs.samples import CELL_KEYS, LAG, MERGED_KEYS, basis_name, metric_name

# Version history of the analytics tables (each table carries it in a `schema_version` column):
#   1 — first version.
#   2 — repeats: `repeats` and `<statistic>_variation_pct` in accounting/percentiles; tables
#       percentiles_by_repeat and repeat_spread; a repeated cell's rows merge its repeats.
TABLES_SCHEMA_VERSION = 2

CELL_COLUMNS = ("run_date", "series_key", "system", "version", "measurement", "label", "status")
TABLES = ("accounting", "percentiles", "percentiles_by_repeat", "repeat_spread")


def merged_facts(facts: DataFrame) -> DataFrame:
    """One row per cell over its repeats: the identity they share, `ok` only when every repeat was ok, and how
    many repeats landed."""
    shared = [F.first(c).alias(c) for c in CELL_COLUMNS if c != "status"]
    return facts.groupBy(*MERGED_KEYS, "cell_ix").agg(
        *shared,
        F.when(F.min(F.col("status") == "ok"), F.lit("ok")).otherwise(F.lit("failed")).alias("status"),
        F.count(F.lit(1)).cast("int").alias("repeats"),
    )


def merged_accounting(acc: DataFrame) -> DataFrame:
    """Per-repeat accounting summed per cell (each repeat's messages are its own: no message counts twice)."""
    return acc.groupBy(*MERGED_KEYS).agg(*[F.sum(c).cast("long").alias(c) for c in ACCOUNTING_COLUMNS])


def accounting_table(acc: DataFrame, facts: DataFrame) -> DataFrame:
    """The accounting with the cell's identity, one row per cell (also for cells without any sample)."""
    return (
        merged_facts(facts)
        .join(merged_accounting(acc), list(MERGED_KEYS))
        .select(
            F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
            *MERGED_KEYS,
            *CELL_COLUMNS,
            "repeats",
            *ACCOUNTING_COLUMNS,
        )
    )


STATISTICS = ("count", "min_ns", "max_ns", "mean_ns", "stddev_ns", *PERCENTILE_COLUMNS, "unsupported")


def _level(summary: DataFrame, levels: Column) -> DataFrame:
    """Summary rows of some levels (never the internal lag metric), with metric and basis named."""
    rows = summary.where(levels & (F.col("metric") != LAG))
    return rows.withColumn("metric", metric_name(F.col("metric"))).withColumn("basis", basis_name(F.col("basis")))


def by_repeat_table(summary: DataFrame, acc: DataFrame, facts: DataFrame) -> DataFrame:
    """The overall rows of every repeat of every cell, each with that repeat's own accounting."""
    rows = _level(summary, F.col("level") == REPEAT)
    identity = facts.select(F.col("unit").alias("g"), *CELL_KEYS, *CELL_COLUMNS)
    table = rows.join(F.broadcast(identity), "g").join(acc.select(*CELL_KEYS, *ACCOUNTING_COLUMNS), list(CELL_KEYS))
    return table.select(
        F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
        *CELL_KEYS,
        *CELL_COLUMNS,
        "metric",
        "basis",
        F.lit(None).cast("int").alias("leader"),
        *STATISTICS,
        *ACCOUNTING_COLUMNS,
    )


def percentile_table(summary: DataFrame, acc: DataFrame, facts: DataFrame, spread: DataFrame) -> DataFrame:
    """One row per cell × metric × basis × leader over all the cell's repeats, with their variation."""
    rows = _level(summary, F.col("level").isin(MERGED, LEADER))
    cells = merged_facts(facts).withColumnRenamed("cell_ix", "g")
    table = (
        rows.join(F.broadcast(cells), "g")
        .join(merged_accounting(acc), list(MERGED_KEYS))
        .join(variation_columns(spread), [*MERGED_KEYS, "metric", "basis"], "left")
    )
    overall = F.col("level") == MERGED  # repeats are compared on the overall rows; a leader row has no variation
    return table.select(
        F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
        *MERGED_KEYS,
        *CELL_COLUMNS,
        "repeats",
        "metric",
        "basis",
        F.when(~overall, F.col("leader")).cast("int").alias("leader"),
        *STATISTICS,
        *ACCOUNTING_COLUMNS,
        *[F.when(overall, F.col(v)).cast("double").alias(v) for v in map(variation_column, STATISTIC_COLUMNS)],
    )


def tables(result: Analysis) -> dict[str, DataFrame]:
    """Every table of `TABLES` from an analysis (measure phase only)."""
    acc = result.ledger.accounting
    by_repeat = by_repeat_table(result.summary, acc, result.facts)
    spread = spread_table(by_repeat)
    return {
        "accounting": accounting_table(acc, result.facts),
        "percentiles": percentile_table(result.summary, acc, result.facts, spread),
        "percentiles_by_repeat": by_repeat,
        "repeat_spread": spread,
    }


def compute(sent: DataFrame, received: DataFrame, cells: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(accounting table, percentile table) of the cells in `cells`, measure phase only."""
    out = tables(analyze(sent, received, cells))
    return out["accounting"], out["percentiles"]


def run(
    spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None
) -> dict[str, list[Path]]:
    """Compute the tables of the runs (from `raw` when the caller has read it already) and write them per
    run. Returns the written partitions by table."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    return lakeio.write_tables(lake, raw.runs, tables(analyze_raw(spark, raw)))


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
