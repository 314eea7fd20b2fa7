"""Timeline job: per cell (per repeat) × metric × basis and second of the schedule, the chronological view.

Columns: second (from the cell's t0, by intended time), phase, count (samples intended in that second),
sent_per_s (messages actually sent in that second), completed_per_s (receipts or acks arriving in it),
p50_ns, p99_ns (exact; null when the second holds too few samples), max_ns. Every phase is kept: seed
001's bad broker showed as an end-of-run buffering spike that only a timeline reveals.
Run alone: `spark-submit spark_jobs/timeline.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs import jobargs, lakeio
from spark_jobs.exact import summarize
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION
from spark_jobs.samples import CELL_KEYS, cell_facts, latency_samples, with_repeat

NS_PER_S = 1_000_000_000
TIMELINE_PERCENTILES = ("50", "99")


def _second(column: str) -> Column:
    return F.floor((F.col(column) - F.col("t0_ns")) / F.lit(NS_PER_S)).cast("long")


def timeline_table(sent: DataFrame, received: DataFrame, cells: DataFrame) -> DataFrame:
    facts = cell_facts(cells)
    t0 = facts.select(*CELL_KEYS, "t0_ns", "measure_start_ns", "measure_end_ns")
    samples = latency_samples(sent, received, facts, phases=None).join(F.broadcast(t0), list(CELL_KEYS))
    keys = [*CELL_KEYS, "metric", "basis", "second"]
    stats = summarize(samples.withColumn("second", _second("at_ns")), keys, percentiles=TIMELINE_PERCENTILES)
    completed = (
        samples.withColumn("second", _second("done_ns")).groupBy(*keys).agg(F.count(F.lit(1)).alias("completed_per_s"))
    )
    sends = (
        with_repeat(sent)
        .where(F.col("sent_ns").isNotNull())
        .join(F.broadcast(t0), list(CELL_KEYS))
        .withColumn("second", _second("sent_ns"))
        .groupBy(*CELL_KEYS, "second")
        .agg(F.count(F.lit(1)).alias("sent_per_s"))
    )
    start_ns = F.col("t0_ns") + F.col("second") * F.lit(NS_PER_S)
    phase = (
        F.when(start_ns < F.col("measure_start_ns"), "warmup")
        .when(start_ns < F.col("measure_end_ns"), "measure")
        .otherwise("cooldown")
    )
    return (
        stats.join(completed, keys, "full")
        .join(sends, [*CELL_KEYS, "second"], "left")
        .join(F.broadcast(t0), list(CELL_KEYS))
        .select(
            F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
            *keys,
            phase.alias("phase"),
            F.coalesce(F.col("count"), F.lit(0)).alias("count"),
            F.coalesce(F.col("sent_per_s"), F.lit(0)).alias("sent_per_s"),
            F.coalesce(F.col("completed_per_s"), F.lit(0)).alias("completed_per_s"),
            "p50_ns",
            "p99_ns",
            "max_ns",
        )
    )


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None) -> list[Path]:
    """Compute the table of the runs (from `raw` when already read) and write one partition per run."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    table = timeline_table(raw.sent, raw.received, raw.cells)
    return [lakeio.write_table(table.where(F.col("run_id") == r.run_id), lake, "timeline", r) for r in raw.runs]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-timeline", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"timeline: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
