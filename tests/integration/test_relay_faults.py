"""A declared fault aimed at a chain's relay on a system with Python workers (core NATS): the core signals the
relay process whatever the system, so the stall is in the cell's tail and fault record, and a kill fails the cell."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")


def test_a_declared_stall_of_a_python_relay_shows_in_the_tail(tmp_path: Path, console: Console) -> None:
    stall = {"at_s": 1.0, "action": "stall", "target": "worker:relay-0", "duration_s": 0.6}
    cell = make_cell("chain", measure_s=3, rate_per_s=500, message_size_bytes=256, faults=[stall])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    (fired,) = report.faults
    assert (fired["kind"], fired["target"]) == ("stall", "worker:relay-0")
    assert report.analysis.metrics["e2e"]["intended"].max_ns >= 0.55e9
    assert report.analysis.metrics["hop1"]["intended"].max_ns >= 0.55e9  # waiting for the frozen relay to read
    assert report.analysis.accounting.lost == 0


def test_a_declared_kill_of_a_python_relay_fails_the_chain_cell(tmp_path: Path, console: Console) -> None:
    kill = {"at_s": 0.5, "action": "kill", "target": "worker:relay-0"}
    report = run_cell(make_cell("chain", measure_s=2, faults=[kill]), Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "relay-0 exited with code -9 (killed by a declared fault)" in report.reason, report.reason
