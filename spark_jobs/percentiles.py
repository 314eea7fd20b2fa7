"""Percentile job: per run × cell × metric × basis (and × leader for Kafka), the whole distribution.

Writes two tables per run (schemas in TABLES.md beside this file):
  tables/accounting/…  one row per cell: every measure-phase message accounted for
  tables/percentiles/… one row per cell × metric × basis × leader (leader null = all leaders): count, min,
                       p50 … p99.9999 (exact, null + listed in `unsupported` when the count cannot support
                       them), max, mean, stddev, plus the cell's accounting.
Run alone: `spark-submit spark_jobs/percentiles.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs import jobargs, lakeio
from spark_jobs.exact import summarize
from spark_jobs.samples import CELL_KEYS, accounting, cell_facts, latency_samples

# Version history of the analytics tables (each table carries it in a `schema_version` column):
#   1 — first version.
TABLES_SCHEMA_VERSION = 1

ACCOUNTING_COLUMNS = (
    "scheduled",
    "sent",
    "send_errors",
    "acknowledged",
    "received",
    "duplicated",
    "lost",
    "acknowledged_but_lost",
)
CELL_COLUMNS = ("run_date", "series_key", "system", "version", "measurement", "label", "status")


def accounting_table(acc: DataFrame, facts: DataFrame) -> DataFrame:
    """The accounting with the cell's identity, one row per cell (also for cells without any sample)."""
    return (
        facts.select(*CELL_KEYS, *CELL_COLUMNS)
        .join(acc, list(CELL_KEYS))
        .select(F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"), *CELL_KEYS, *CELL_COLUMNS, *ACCOUNTING_COLUMNS)
    )


def percentile_table(samples: DataFrame, acc: DataFrame, facts: DataFrame) -> DataFrame:
    """Overall rows (leader null) plus, where receipts carry a leader (Kafka), one row per leader."""
    keys = [*CELL_KEYS, "metric", "basis"]
    overall = summarize(samples, keys).withColumn("leader", F.lit(None).cast("int"))
    by_leader = summarize(samples.where(F.col("leader").isNotNull()), [*keys, "leader"])
    rows = overall.unionByName(by_leader)
    table = rows.join(facts.select(*CELL_KEYS, *CELL_COLUMNS), list(CELL_KEYS)).join(
        acc.select(*CELL_KEYS, *ACCOUNTING_COLUMNS), list(CELL_KEYS)
    )
    stats = [c for c in rows.columns if c not in (*keys, "leader")]
    return table.select(
        F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
        *CELL_KEYS,
        *CELL_COLUMNS,
        "metric",
        "basis",
        "leader",
        *stats,
        *ACCOUNTING_COLUMNS,
    )


def compute(sent: DataFrame, received: DataFrame, cells: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(accounting table, percentile table) of the cells in `cells`, measure phase only."""
    facts = cell_facts(cells)
    acc = accounting(sent, received, facts)
    samples = latency_samples(sent, received, facts)
    return accounting_table(acc, facts), percentile_table(samples, acc, facts)


def run(
    spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None
) -> dict[str, list[Path]]:
    """Compute both tables of the runs (from `raw` when the caller has read it already) and write them per
    run. Returns the written partitions by table."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    acc, pct = compute(raw.sent, raw.received, raw.cells)
    acc, pct = acc.cache(), pct.cache()
    written: dict[str, list[Path]] = {"accounting": [], "percentiles": []}
    for ref in raw.runs:
        mine = F.col("run_id") == ref.run_id
        written["accounting"].append(lakeio.write_table(acc.where(mine), lake, "accounting", ref))
        written["percentiles"].append(lakeio.write_table(pct.where(mine), lake, "percentiles", ref))
    acc.unpersist()
    pct.unpersist()
    return written


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
