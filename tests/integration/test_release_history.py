"""The release that moved the tail, found on real brokers: three nats-server releases of one cell, twice each,
the middle release's broker squeezed to a sliver of a CPU (a cgroup quota) while it is measured; the pipeline's
tables are published, and the report's release history names the squeezed release and charts every release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import PHASES, CellWork
from bench_tasks.lake.layout import RunInfo
from bench_tasks.load import cpushare
from bench_tasks.regressions.history import read_history, read_repeat_spreads
from bench_tasks.regressions.releases import moves, release_histories, tail_verdict
from bench_tasks.report import build_run_report
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.repeats import expand_repeats

pytestmark = [
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.skipif(cpushare.unavailable() is not None, reason=f"{cpushare.unavailable()}"),
]
RELEASES = ("2.12.8", "2.14.6", "2.15.1")  # each has a PyPI wheel: nothing to build
SQUEEZED = "2.14.6"


def history_matrix() -> dict:
    return {
        "name": "history_test",
        "systems": [{"system": "nats", "versions": list(RELEASES), "broker": {"mode": "core"}}],
        "workload": {
            "message_size_bytes": 1024,
            "rate_per_s": 1000,
            "warmup_s": 1,
            "measure_s": 3,
            "cooldown_s": 0.5,
            "max_schedule_lag_ms": 1000,
        },
        "measurements": ["e2e"],
        "repeats": 2,
    }


def run_squeezed(cell: object, run: RunInfo, lake: Path, work: CellWork, squeeze: bool) -> dict:
    """Airflow's steps of one cell, the broker moved into a cgroup of 2 % of a CPU before the generator starts."""
    provision_when_free(cell, run, lake, work)  # type: ignore[arg-type]
    group = None
    try:
        if squeeze:
            (pid,) = work.read(work.state)["brokers"]["nodes"].values()  # type: ignore[index]
            group = cpushare.confine(f"squeeze-{work.root.name}", 0.02, pid)
        start_generator(work)
        for phase in PHASES:
            watch_phase(work, phase, log=lambda _line: None, poll_s=0.2)
        return land_step(work)
    finally:
        teardown_step(work)
        if group is not None:
            cpushare.release(group.name)


@pytest.mark.timeout(900)
def test_the_release_that_moved_the_tail_is_named(tmp_path: Path) -> None:
    lake, run = tmp_path / "lake", RunInfo.new()
    matrix = parse_matrix(history_matrix(), "history_test")
    for index, cell in enumerate(expand_repeats(matrix.cells)):
        prepared = prepare_cell(cell)
        work = CellWork(tmp_path / "work" / f"c{index:02d}")
        landed = run_squeezed(prepared, run, lake, work, prepared.spec.version == SQUEEZED)
        assert landed["status"] == "ok", landed["reason"]

    env = {**os.environ, "SIXNINES_LAKE": str(lake)}
    analysed = subprocess.run(
        [sys.executable, "-m", "bench_tasks", "analyze", run.run_id], capture_output=True, text=True, env=env
    )
    assert analysed.returncode == 0, analysed.stdout[-2000:] + analysed.stderr[-2000:]

    rows = read_history(lake)
    spreads = read_repeat_spreads(lake, {(r["run_date"], r["run_id"]) for r in rows})
    (history,) = [h for h in release_histories(rows, spreads) if (h.metric, h.basis) == ("e2e", "intended")]
    assert history.releases == list(RELEASES) and all(b is not None for b in history.bands["99"])
    verdict = tail_verdict(moves(history))
    assert verdict is not None, json.dumps(history.rows, default=str)[:2000]
    assert (verdict.release, verdict.previous) == (SQUEEZED, RELEASES[0])
    assert verdict.change.relative_change > 1.0  # the squeeze more than doubled the tail

    page = build_run_report(lake, run.run_id).read_text()
    assert "Release history" in page and f"The tail moved at {SQUEEZED}" in page
    assert all(f'id="release-0-{p}"' in page for p in ("p50", "p99", "p99.9", "max"))
