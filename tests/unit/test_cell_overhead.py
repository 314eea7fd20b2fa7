"""A cell's wall time beyond its phases (`landing.cell_overhead`), as result.json records it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from bench_tasks.cell.drive import CellRun
from bench_tasks.cell.landing import cell_overhead
from bench_tasks.core.schedule import PhasePlan

S = 1_000_000_000


def test_the_time_before_t0_and_after_the_schedule_is_measured_on_wall_clocks(tmp_path: Path) -> None:
    started = dt.datetime(2026, 12, 6, 6, 0, 0, tzinfo=dt.UTC)
    wall_t0 = started.timestamp() + 1.25  # brokers up and workers ready 1.25 s after provisioning began
    run = CellRun(PhasePlan(5 * S, 3 * S, 10 * S, 2 * S), wall_t0, tmp_path)
    landing_starts = wall_t0 + 15 + 0.5  # the schedule (3 + 10 + 2 s) ended 0.5 s before landing began
    overhead = cell_overhead(started.isoformat(), run, now_s=landing_starts)
    assert overhead == pytest.approx({"before_t0_s": 1.25, "after_end_s": 0.5, "total_s": 1.75})


def test_a_cell_that_never_ran_has_no_overhead() -> None:
    assert cell_overhead(dt.datetime.now(dt.UTC).isoformat(), None) is None


def test_the_workers_ready_time_is_recorded_and_survives_the_facts_file(tmp_path: Path) -> None:
    started = dt.datetime(2026, 12, 6, 6, 0, 0, tzinfo=dt.UTC)
    run = CellRun(PhasePlan(5 * S, 1 * S, 1 * S, 1 * S), started.timestamp() + 2, tmp_path, workers_ready_s=0.42)
    again = CellRun.from_facts(run.facts(), tmp_path)  # as the generator's cellrun.json hands it to land
    assert again is not None and again.workers_ready_s == 0.42
    overhead = cell_overhead(started.isoformat(), again, now_s=started.timestamp() + 2 + 3)
    assert overhead == pytest.approx({"before_t0_s": 2, "after_end_s": 0, "total_s": 2, "workers_ready_s": 0.42})
