"""The capacity tables: a run's searches (capacity.json beside its cells) as a row per searched cell and a row
per step, written with the run's other tables and published as CSV; a run without searches gives no rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from pyspark.sql import SparkSession

from bench_tasks.capacity.search import Search, Step
from bench_tasks.regressions.history import read_capacity_history
from spark_jobs import capacity
from spark_jobs.lakeio import find_run, raw_dir, read_table
from tests.spark.synth import SynthCell, write_run


def a_search() -> dict:
    """A search as `search_capacity` leaves it: steps judged against a broker that breaks at 3000/s."""
    search = Search(1000, 16000, resolution=0.25)
    while (rate := search.next_rate()) is not None:
        verdict = "pass" if rate < 3000 else "objective"
        shown = {"e2e": {"50": rate / 1e4, "99": rate / 1e3, "99.9": None, "max": rate / 1e2}}
        search.record(Step(rate, verdict, f"at {rate}", f"step{int(rate)}", rate, rate * 0.99, shown))  # type: ignore[arg-type]
    ident = {"cell_id": "core", "series_key": "k1", "label": "nats/core", "system": "nats", "version": "2.15.1"}
    return ident | {"objectives": ["e2e p99 < 3ms"]} | search.result()


def test_a_run_s_searches_become_two_tables_and_are_published(spark: SparkSession, tmp_path: Path) -> None:
    run = write_run(tmp_path, [SynthCell("core")], run_id="searched")
    found = a_search()
    ref = find_run(tmp_path, run.run_id)
    (raw_dir(tmp_path, ref) / "capacity.json").write_text(json.dumps({"run_id": run.run_id, "cells": [found]}))
    from spark_jobs.pipeline import run_analysis

    folder = run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    (row,) = read_table(spark, tmp_path, "capacity", [ref]).toArrow().to_pylist()
    assert (row["cell_id"], row["series_key"], row["limit"], row["broker_bound"]) == ("core", "k1", "objective", True)
    assert row["capacity_per_s"] == found["capacity_per_s"] and row["steps"] == len(found["steps"]) > 3
    steps = read_table(spark, tmp_path, "capacity_steps", [ref]).toArrow().to_pylist()
    by_rate = {s["rate_per_s"]: s for s in steps}
    assert sorted(by_rate) == sorted(s["rate_per_s"] for s in found["steps"])
    held = by_rate[2000.0]
    assert (held["verdict"], held["metric"], held["p99_ms"]) == ("pass", "e2e", 2.0)
    assert held["p99_9_ms"] is None  # unsupported stays unsupported
    assert len(list(csv.DictReader((folder / "capacity_steps.csv").open()))) == len(steps)
    written = capacity.run(spark, tmp_path, [run.run_id])  # the job on its own writes the same partitions
    assert set(written) == {"capacity", "capacity_steps"}
    (history,) = read_capacity_history(tmp_path)  # published capacities join the regression history
    assert (history["system"], history["version"], history["objectives"]) == ("nats", "2.15.1", "e2e p99 < 3ms")
    assert history["capacity_per_s"] == found["capacity_per_s"] and history["run_id"] == "searched"


def test_a_run_without_searches_has_empty_capacity_tables(spark: SparkSession, tmp_path: Path) -> None:
    run = write_run(tmp_path, [SynthCell("core")], run_id="plain")
    tables = capacity.capacity_tables(tmp_path, [find_run(tmp_path, run.run_id)])
    assert tables["capacity"].num_rows == tables["capacity_steps"].num_rows == 0
    assert read_capacity_history(tmp_path) == []
