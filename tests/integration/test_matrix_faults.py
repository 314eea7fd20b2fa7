"""Faults a matrix declares, on real brokers: a stall of the measured route's leader shows up in its per-fault
record (the node hit, a gap without arrivals as long as the stall, nothing lost) in the report, result.json and
the cells row."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")

STALL = {"at_s": 0.5, "action": "stall", "target": "leader", "duration_s": 1.0}


def _landed_faults(tmp_path: Path, report_path: Path) -> tuple[list[dict], list[dict]]:
    result = json.loads((report_path / "result.json").read_text())
    (row,) = pq.read_table(next((tmp_path / "runs").rglob("cells.parquet"))).to_pylist()
    return result["faults"], json.loads(row["faults_json"])


def test_a_declared_stall_of_a_single_server_is_a_gap_in_arrivals(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", rate_per_s=200, warmup_s=1, measure_s=2.5, cooldown_s=0.5, faults=[STALL])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    (fault,) = report.faults
    print(f"\nper-fault record: {fault}")
    assert (fault["kind"], fault["target"], fault["node"], fault["at_s"]) == ("stall", "leader", 0, 0.5)
    assert 0.5 <= fault["fired_s"] < 0.7  # the schedule loop's tick, then SIGSTOP until every thread stopped
    assert fault["ended_s"] - fault["fired_s"] == pytest.approx(1.0, abs=0.1)
    assert fault["first_arrival_after_s"] >= 0.8 and fault["max_arrival_gap_s"] >= 0.8
    assert fault["lost"] == 0
    assert fault["scheduled"] == pytest.approx((2.5 - fault["fired_s"]) * 200, abs=2)  # meant from fire to the end
    assert _landed_faults(tmp_path, report.path) == ([fault], [fault])


def test_a_declared_leader_stall_on_jetstream_r3_loses_nothing_acknowledged(tmp_path: Path, console: Console) -> None:
    broker = {"mode": "jetstream", "storage": "memory", "servers": 3, "replicas": 3}
    cell = make_cell("e2e", broker, rate_per_s=200, warmup_s=1, measure_s=2.5, cooldown_s=0.5, faults=[STALL])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    (fault,) = report.faults
    print(f"\nper-fault record: {fault}")
    assert fault["node"] in (1, 2, 3) and fault["leader_before"] == fault["node"]  # the leader was hit
    assert fault["leader_after"] in (1, 2, 3)
    assert fault["max_arrival_gap_s"] >= 0.8
    assert fault["acknowledged_but_lost"] == 0
    assert report.analysis is not None and report.analysis.accounting.acknowledged_but_lost == 0


def test_a_declared_restart_brings_the_server_back_and_leaves_nothing_running(tmp_path: Path, console: Console) -> None:
    restart = {"at_s": 0.5, "action": "restart", "target": "node:0"}
    cell = make_cell("e2e", rate_per_s=200, warmup_s=1, measure_s=3, cooldown_s=0.5, faults=[restart])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    (fault,) = report.faults
    print(f"\nper-fault record: {fault}\naccounting: {report.analysis.accounting if report.analysis else None}")
    assert (fault["kind"], fault["node"]) == ("restart", 0)
    assert fault["first_arrival_after_s"] is not None  # the server came back and delivered again
    assert fault["max_arrival_gap_s"] < 2.0
    assert fault["lost"] < fault["scheduled"]
