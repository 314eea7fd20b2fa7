"""Capacity job: a run's capacity searches (`raw/.../capacity.json`, written by `sixnines capacity` and the search
DAG) as two tables: `capacity` (a row per searched cell: the capacity, what limited it, whether that limit is
the broker's) and `capacity_steps` (a row per step: the offered rate, what arrived, the verdict, and the
response-time p50/p99/p99.9 of the first objective's metric, or of the first metric measured when the objectives
bound the backlog only). A run without searches gives no rows. The file is
a few kilobytes, read on the driver. Run alone: `spark-submit spark_jobs/capacity.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs import jobargs, lakeio
from spark_jobs.localdata import rows_table
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION

_RUN = [("schema_version", pa.int32()), ("run_id", pa.string()), ("run_date", pa.string())]
_CELL = [("cell_id", pa.string()), ("series_key", pa.string()), ("label", pa.string())]
CAPACITY_FIELDS = [
    *_RUN,
    *_CELL,
    ("system", pa.string()),
    ("version", pa.string()),
    ("objectives", pa.string()),
    ("capacity_per_s", pa.float64()),
    ("limit", pa.string()),
    ("limit_why", pa.string()),
    ("broker_bound", pa.bool_()),
    ("steps", pa.int32()),
]
STEP_FIELDS = [
    *_RUN,
    *_CELL,
    ("step_cell_id", pa.string()),
    ("rate_per_s", pa.float64()),
    ("verdict", pa.string()),
    ("why", pa.string()),
    ("achieved_rate_per_s", pa.float64()),
    ("received_rate_per_s", pa.float64()),
    ("metric", pa.string()),
    ("p50_ms", pa.float64()),
    ("p99_ms", pa.float64()),
    ("p99_9_ms", pa.float64()),
]


def searches(lake: lakeio.Lake, run: lakeio.RunRef) -> list[dict[str, Any]]:
    """The run's searches as `capacity.json` holds them; none when the run searched nothing."""
    path = lakeio.raw_dir(lake, run) / "capacity.json"
    return json.loads(path.read_text()).get("cells") or [] if path.exists() else []


def capacity_rows(run: lakeio.RunRef, found: Sequence[dict[str, Any]]) -> tuple[list[tuple], list[tuple]]:
    """(capacity rows, step rows) of one run's searches, in the tables' column order."""
    cells, steps = [], []
    for r in found:
        ident = (TABLES_SCHEMA_VERSION, run.run_id, run.run_date, r["cell_id"], r.get("series_key"), r["label"])
        objectives, limit = "; ".join(r["objectives"]), (r["limit"], r["limit_why"], r["broker_bound"])
        release = (r.get("system"), r.get("version"))  # searches written before these were recorded lack them
        cells.append((*ident, *release, objectives, r["capacity_per_s"], *limit, len(r["steps"])))
        metric = _shown_metric(r["objectives"], r["steps"])
        steps += [(*ident, *_step(s, metric)) for s in r["steps"]]
    return cells, steps


def _shown_metric(objectives: Sequence[str], steps: Sequence[dict[str, Any]]) -> str | None:
    """The metric whose percentiles the step rows carry: the first latency objective's, else (the objectives
    bound the backlog only, which counts messages) the first metric the steps measured."""
    latency = [text.split()[0] for text in objectives if text.split()[0] != "backlog"]  # backlog: in messages
    if latency:
        return latency[0]
    return next((m for s in steps for m in (s.get("percentiles_ms") or {})), None)


def _step(s: dict[str, Any], metric: str | None) -> tuple:
    """One step's row after the cell's identity: the step's own cell, rates, verdict, the metric's percentiles."""
    shown = (s.get("percentiles_ms") or {}).get(metric) or {}
    rates = (float(s["rate_per_s"]), s["verdict"], s["why"], float(s["achieved_rate_per_s"]))
    percentiles = (shown.get(p) for p in ("50", "99", "99.9"))
    return (s["cell_id"], *rates, float(s["received_rate_per_s"]), metric, *percentiles)


def capacity_tables(lake: lakeio.Lake, runs: Sequence[lakeio.RunRef]) -> dict[str, pa.Table]:
    """The two tables of the runs' searches (no rows for a run that searched nothing)."""
    cells: list[tuple] = []
    steps: list[tuple] = []
    for run in runs:
        more_cells, more_steps = capacity_rows(run, searches(lake, run))
        cells += more_cells
        steps += more_steps
    return {
        "capacity": rows_table(cells, pa.schema(CAPACITY_FIELDS)),
        "capacity_steps": rows_table(steps, pa.schema(STEP_FIELDS)),
    }


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str]) -> dict[str, list[Path]]:
    runs = [lakeio.find_run(lake, r) for r in run_ids]
    return lakeio.write_collected(lake, runs, capacity_tables(lake, runs))  # type: ignore[return-value]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for name, paths in run(
        get_spark("sixnines-capacity", args.master, lake=args.lake), args.lake, args.run_ids
    ).items():
        print(f"{name}: {', '.join(map(str, paths))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
