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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.levels import NS_PER_S, SECOND
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION
from spark_jobs.samples import CELL_KEYS, LAG, basis_name, metric_name


def _per_second(done: DataFrame, keys: list[str], name: str) -> DataFrame:
    """Samples counted by the second they were done in (sent, received, acknowledged)."""
    return done.groupBy(*keys, F.col("sec").alias("second")).agg(F.sum("n").alias(name))


def timeline_table(result: Analysis) -> DataFrame:
    """Per unit × metric × basis × second: the SECOND level's count, p50, p99 and max, the completions and the
    sends of that second (every phase)."""
    keys = ["unit", "metric", "basis", "second"]
    stats = result.summary.where(F.col("level") == SECOND).select(
        F.col("g").alias("unit"), "metric", "basis", F.col("sec").alias("second"), "count", "p50_ns", "p99_ns", "max_ns"
    )
    done = result.done
    completed = _per_second(done.where(F.col("metric") != LAG), ["unit", "metric", "basis"], "completed_per_s")
    sends = _per_second(done.where(F.col("metric") == LAG), ["unit"], "sent_per_s")
    facts = result.facts.select(*CELL_KEYS, "unit", "t0_ns", "measure_start_ns", "measure_end_ns")
    start_ns = F.col("t0_ns") + F.col("second") * F.lit(NS_PER_S)
    phase = (
        F.when(start_ns < F.col("measure_start_ns"), "warmup")
        .when(start_ns < F.col("measure_end_ns"), "measure")
        .otherwise("cooldown")
    )
    return (
        stats.join(completed, keys, "full")
        .join(sends, ["unit", "second"], "left")
        .join(F.broadcast(facts), "unit")
        .select(
            F.lit(TABLES_SCHEMA_VERSION).alias("schema_version"),
            *CELL_KEYS,
            metric_name(F.col("metric")).alias("metric"),
            basis_name(F.col("basis")).alias("basis"),
            "second",
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
    table = timeline_table(analyze_raw(spark, raw))
    return lakeio.write_tables(lake, raw.runs, {"timeline": table})["timeline"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-timeline", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"timeline: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
