"""Cells on brokers the caller holds (`held_brokers`, `run_on_brokers`: what bench/native_compare.py runs its rows
with): one real nats-server, two cells on it in turn, each landed like any cell, the server gone after."""

from __future__ import annotations

from pathlib import Path

import psutil
import pytest
from rich.console import Console

from bench_tasks import Lake, held_brokers, run_on_brokers
from tests.host_turns import holding_the_host

from .helpers import make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")


def test_two_cells_on_one_held_server_land_and_the_server_stops(tmp_path: Path, console: Console) -> None:
    # what lands is the question here, not the generator's precision on a loaded host
    first, second = (make_cell("e2e", rate_per_s=rate, max_schedule_lag_ms=1000) for rate in (500, 1000))
    lake = Lake(tmp_path / "lake")
    # Held brokers take no lease (the tool holding them holds the host): without the suite's, these cells ran
    # beside other workers' cells at normal priority, and at load ~20 a consumer waited for a CPU 98 % of its phase.
    with holding_the_host(tmp_path / "held"), held_brokers(first, tmp_path / "brokers") as brokers:
        pids = brokers.pids()
        reports = [run_on_brokers(cell, brokers, lake, console) for cell in (first, second)]
        assert brokers.pids() == pids  # the same server served both

    for cell, report, scheduled in zip((first, second), reports, (500, 1000), strict=True):
        assert report.status == "ok", report.reason
        assert report.cell.id == cell.id and report.path is not None and (report.path / "result.json").exists()
        acc = report.analysis.accounting
        assert acc.scheduled == acc.sent == acc.received == scheduled and acc.lost == 0
    assert reports[0].path != reports[1].path
    assert not [pid for pid in pids if psutil.pid_exists(pid)]
