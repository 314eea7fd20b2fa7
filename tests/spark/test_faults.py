"""The faults table (a row per fault of every cell, from the cells rows) and the gate's rule on it: no fault may
cost an acknowledged message where the cell's settings promise none (`durable_acks`)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from expectations import build_faults_suite
from spark_jobs import GateError, faults
from spark_jobs.lakeio import find_run, read_table
from tests.spark.synth import SynthCell, write_run

R3_FILE = {"broker": {"mode": "jetstream", "servers": 3, "replicas": 3, "storage": "file"}}


def fault(kind: str, fired_s: float, acknowledged_but_lost: int) -> dict[str, Any]:
    """A fault's record as landing writes it (bench_tasks.core.faultcost)."""
    return {
        "kind": kind,
        "start_ns": 0,
        "end_ns": 0,
        "target": "leader",
        "node": 2,
        "at_s": fired_s,
        "duration_s": 0.0,
        "fired_s": fired_s,
        "ended_s": fired_s,
        "window_end_s": 2.0,
        "leader_before": 2,
        "leader_after": 3,
        "first_arrival_after_s": 0.4,
        "max_arrival_gap_s": 0.4,
        "p99_baseline_ms": 1.5,
        "p99_recovery_s": None,
        "scheduled": 1000,
        "sent": 1000,
        "send_errors": 0,
        "lost": acknowledged_but_lost,
        "duplicated": 1,
        "acknowledged_but_lost": acknowledged_but_lost,
    }


def promising(faults: list[dict[str, Any]]) -> SynthCell:
    return SynthCell("r3", mode="jetstream", extra_spec=R3_FILE, faults=faults)


def test_the_faults_suite_holds_what_its_builder_adds() -> None:
    assert len(build_faults_suite().expectations) == 5 + 1


def test_each_fault_is_a_row_and_acked_loss_passes_where_nothing_was_promised(
    spark: SparkSession, tmp_path: Path
) -> None:
    r1 = SynthCell("r1", mode="jetstream", seed=1, faults=[fault("kill", 1.0, 3)])  # R1: a kill may lose acked
    run = write_run(tmp_path, [promising([fault("stall", 0.5, 0), fault("kill", 1.0, 0)]), r1, SynthCell("core")])
    from spark_jobs.pipeline import run_analysis

    folder = run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    rows = read_table(spark, tmp_path, "faults", [find_run(tmp_path, run.run_id)]).toArrow().to_pylist()
    got = sorted((r["cell_id"], r["fault"], r["kind"], r["durable_acks"], r["acknowledged_but_lost"]) for r in rows)
    assert got == [("r1", 0, "kill", False, 3), ("r3", 0, "stall", True, 0), ("r3", 1, "kill", True, 0)]
    first = next(r for r in rows if r["cell_id"] == "r3" and r["fault"] == 0)
    assert (first["p99_baseline_ms"], first["p99_recovery_s"], first["duplicated"]) == (1.5, None, 1)
    assert (first["system"], first["measurement"], first["repeat"], first["leader_after"]) == ("nats", "e2e", 1, 3)
    published = list(csv.DictReader((folder / "faults.csv").open()))
    assert len(published) == 3 and {r["cell_id"] for r in published} == {"r1", "r3"}
    (alone,) = faults.run(spark, tmp_path, [run.run_id])  # the job run on its own writes the same partition
    assert pq.read_table(alone).num_rows == 3


def test_the_gate_refuses_acked_loss_on_a_cell_that_promised_none(spark: SparkSession, tmp_path: Path) -> None:
    run = write_run(tmp_path, [promising([fault("kill", 1.0, 2)])], run_id="acked-lost")
    from spark_jobs.pipeline import run_analysis

    with pytest.raises(GateError) as failure:
        run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    assert "faults: expect_column_values_to_be_between" in str(failure.value)
    assert '"acknowledged_but_lost_promised"' in str(failure.value)
    assert not (tmp_path / "published").exists() or not any((tmp_path / "published").rglob("*.csv"))
    quarantined = next((tmp_path / "quarantine").rglob("validation.json")).parent
    validation = json.loads((quarantined / "validation.json").read_text())
    assert validation["suites"]["faults"]["success"] is False and validation["suites"]["raw_cells"]["success"]
    assert (quarantined / "faults.csv").exists()
