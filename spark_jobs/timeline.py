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

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.levels import NS_PER_S, SECOND
from spark_jobs.localdata import arrow_table
from spark_jobs.metrics import LAG, basis_names, metric_names
from spark_jobs.percentiles import NAMED_FIELDS, TABLES_SCHEMA_VERSION, VERSION_FIELD, key_fields
from spark_jobs.samples import CELL_KEYS

TIMELINE_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        *key_fields(CELL_KEYS),
        *NAMED_FIELDS,
        pa.field("second", pa.int64()),
        pa.field("phase", pa.string(), nullable=False),
        *(pa.field(c, pa.int64(), nullable=False) for c in ("count", "sent_per_s", "completed_per_s")),
        *(pa.field(c, pa.int64()) for c in ("p50_ns", "p99_ns", "max_ns")),
    ]
)


def _per_second(done: pd.DataFrame, keys: list[str], name: str) -> pd.DataFrame:
    """Samples counted by the second they were done in (sent, received, acknowledged)."""
    return (
        done.groupby([*keys, "sec"], sort=False)["n"].sum().rename(name).reset_index().rename(columns={"sec": "second"})
    )


def _phase(rows: pd.DataFrame) -> np.ndarray:
    """Each second's phase, by the time it starts (a unit without a measure window: cooldown, as Spark's CASE
    gave it)."""
    start_ns = rows["t0_ns"] + rows["second"] * NS_PER_S
    return np.select(
        [start_ns < rows["measure_start_ns"], start_ns < rows["measure_end_ns"]], ["warmup", "measure"], "cooldown"
    )


def timeline_table(result: Analysis) -> pa.Table:
    """Per unit × metric × basis × second: the SECOND level's count, p50, p99 and max, the completions and the
    sends of that second (every phase)."""
    keys = ["unit", "metric", "basis", "second"]
    summary = result.summary
    stats = summary[summary["level"] == SECOND].rename(columns={"g": "unit", "sec": "second"})
    stats = stats[[*keys, "count", "p50_ns", "p99_ns", "max_ns"]]
    done, lag = result.done, result.done["metric"] == LAG
    completed = _per_second(done[~lag], ["unit", "metric", "basis"], "completed_per_s")
    sends = _per_second(done[lag], ["unit"], "sent_per_s")
    facts = result.facts[[*CELL_KEYS, "unit", "t0_ns", "measure_start_ns", "measure_end_ns"]]
    rows = stats.merge(completed, on=keys, how="outer").merge(sends, on=["unit", "second"], how="left")
    rows = rows.merge(facts, on="unit")
    counts = {c: rows[c].fillna(0) for c in ("count", "sent_per_s", "completed_per_s")}
    rows = rows.assign(
        schema_version=TABLES_SCHEMA_VERSION,
        metric=metric_names(rows["metric"]),
        basis=basis_names(rows["basis"]),
        phase=_phase(rows),
        **counts,
    )
    return arrow_table(rows, TIMELINE_SCHEMA)


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None) -> list[Path]:
    """Compute the table of the runs (from `raw` when already read) and write one partition per run."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    table = timeline_table(analyze_raw(spark, raw))
    return lakeio.write_collected(lake, raw.runs, {"timeline": table})["timeline"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-timeline", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"timeline: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
