"""Faults during measure: a frozen broker must show up as latency (CTRL+Z), a killed one as loss."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.calibrate import CalibrationSpec, calibrate
from bench_tasks.cell.drive import Fault
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import make_cell

pytestmark = [pytest.mark.usefixtures("no_orphans"), pytest.mark.host_alone]

STALL_S = 1.0
# A measure phase of six stalls: the stall's requests are ~1/6 of the samples (the corrected p99 and max see it at
# any host speed) and 20 of 6,000 uncorrected ones (under the 1 % a p99 hides). Twelve cost 6 s a test.
MEASURE_S = 6


def test_ctrl_z_rtt_stall_shows_in_corrected_percentiles_only(tmp_path: Path, console: Console) -> None:
    spec = CalibrationSpec(
        system="nats",
        measurement="rtt",
        rate_per_s=1000,
        connections=20,
        warmup_s=2,
        measure_s=MEASURE_S,
        cooldown_s=2,
        stall_s=STALL_S,
    )
    data = calibrate(spec, tmp_path, console).to_dict()

    assert data["status"] == "ok", data["reason"]
    assert data["count"] == 1000 * MEASURE_S
    stall_ms = STALL_S * 1e3
    assert data["stall_observed_s"] == pytest.approx(STALL_S, abs=0.2)
    assert data["corrected"]["99"] >= 0.5 * stall_ms
    assert data["corrected"]["max"] >= 0.9 * stall_ms
    assert data["uncorrected"]["99"] < 0.1 * stall_ms  # coordinated omission hides the stall
    assert data["accounting"]["lost"] == 0


def test_ctrl_z_e2e_stall_shows_one_way(tmp_path: Path, console: Console) -> None:
    spec = CalibrationSpec(
        "nats", measurement="e2e", rate_per_s=1000, warmup_s=2, measure_s=MEASURE_S, cooldown_s=2, stall_s=STALL_S
    )
    data = calibrate(spec, tmp_path, console).to_dict()

    assert data["status"] == "ok", data["reason"]
    assert data["corrected"]["99"] >= 0.5 * STALL_S * 1e3
    assert data["corrected"]["max"] >= 0.9 * STALL_S * 1e3
    assert data["accounting"]["lost"] == 0


def test_killed_server_is_counted_as_loss(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", rate_per_s=500, warmup_s=1, measure_s=3, cooldown_s=1, drain_timeout_s=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=1.0)])

    assert [f["kind"] for f in report.faults] == ["kill"]  # declared: the broker watch records nothing of its own
    assert "no fault was declared" not in (report.reason or "")
    acc = report.analysis.accounting
    assert acc.scheduled == 1500
    assert acc.received > 0  # the first second of measure got through
    assert acc.lost + acc.send_errors > 0.4 * acc.scheduled  # the last two seconds did not
    assert acc.received + acc.lost + acc.send_errors == acc.scheduled  # every message accounted for
    assert (report.path / "broker.log").exists()


def _kill_worker_when_running(title: str, after_s: float) -> threading.Thread:
    """Kill (by PID) the generator worker whose process title starts with `title`, once it has run a while."""

    def killer() -> None:
        deadline = time.monotonic() + 600  # the cell may first wait for the host lease
        while time.monotonic() < deadline:
            for proc in psutil.Process().children(recursive=True):
                try:
                    if " ".join(proc.cmdline()).startswith(title):
                        time.sleep(after_s)
                        proc.kill()
                        return
                except psutil.NoSuchProcess:
                    continue
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def test_dead_producer_fails_the_cell_but_keeps_its_data(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", rate_per_s=400, warmup_s=1, measure_s=4, cooldown_s=1)
    killer = _kill_worker_when_running(f"sixnines producer-0 cell {cell.id}", after_s=3.0)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    killer.join(timeout=5)

    assert report.status == "failed"
    assert "producer-0" in report.reason and str(-signal.SIGKILL) in report.reason
    assert (report.path / "received-c0.parquet").exists()  # the consumer's samples were landed
    assert report.analysis is not None and report.analysis.metrics["e2e"]["intended"].count > 0
    rows = pq.read_table(next((tmp_path / "runs").rglob("cells.parquet"))).to_pylist()
    assert rows[0]["status"] == "failed" and "producer-0" in rows[0]["reason"]


def test_ctrl_z_kafka_broker_stall_shows_one_way(tmp_path: Path, console: Console) -> None:
    """`sixnines calibrate --system kafka`: freezing the single broker shows up as response time."""
    spec = CalibrationSpec(
        system="kafka", measurement="e2e", rate_per_s=500, warmup_s=3, measure_s=8, cooldown_s=1, stall_s=STALL_S
    )
    data = calibrate(spec, tmp_path, console).to_dict()

    assert data["status"] == "ok", data["reason"]
    assert data["count"] == 4_000
    assert data["stall_observed_s"] == pytest.approx(STALL_S, abs=0.2)
    assert data["corrected"]["99"] >= 0.5 * STALL_S * 1e3
    assert data["corrected"]["max"] >= 0.9 * STALL_S * 1e3
    assert data["checks"] == {"corrected_max_at_least_0.9_stall": True, "corrected_p99_at_least_0.5_stall": True}
    assert data["accounting"]["lost"] == 0
