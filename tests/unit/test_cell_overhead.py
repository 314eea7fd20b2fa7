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


def test_the_benchmark_lists_each_cells_overhead_in_the_order_the_cells_ran() -> None:
    """bench/cell_overhead.py: which cell is its system's worst, and whether it ran first (a fresh broker and no
    standby generator to claim); a cell that never reached its schedule has no overhead and is left out."""
    from bench.cell_overhead import by_cell

    def cell(label: str, t0_ns: int, total_s: float) -> dict:
        return {"label": label, "repeat": 1, "phases": {"t0_ns": t0_ns}, "overhead": {"total_s": total_s}}

    never = {"label": "never", "phases": None, "overhead": None}
    listed = by_cell([cell("second", 20, 0.8), never, cell("first", 10, 1.4)])
    assert listed == [{"label": "first", "repeat": 1, "total_s": 1.4}, {"label": "second", "repeat": 1, "total_s": 0.8}]
