"""The detached cell lifecycle Airflow runs (provision → generator → phase watchers → land → teardown), here
without Airflow: real nats-server, real generator process, real lake."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from bench_tasks.cell.detached import release_generator, start_generator, stop_standbys
from bench_tasks.cell.hostlease import live_holder
from bench_tasks.cell.hostparts import base_env
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_step, provision_when_free
from bench_tasks.cell.standby import start_standby
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import PHASES, CellWork
from bench_tasks.errors import CellError
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix_model import Cell
from tests.host_turns import on_a_lease_of_its_own

from .helpers import make_cell


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_detached_steps_land_one_row_and_leave_nothing(tmp_path: Path, no_orphans: None) -> None:
    cell = prepare_cell(make_cell("e2e", rate_per_s=1000))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    info = provision_when_free(cell, run, lake, work)
    assert info["cell_id"] == cell.id and info["policy"] == "fresh" and not info["reused"]
    try:  # a failed assertion still stops the broker, or no_orphans fails as well
        generator = start_generator(work)
        assert start_generator(work) == generator  # idempotent while it runs
        lines: list[str] = []
        summaries = [watch_phase(work, phase, log=lines.append, poll_s=0.2, log_every_s=0.5) for phase in PHASES]
        assert [s["phase"] for s in summaries] == list(PHASES)
        status = work.read(work.status)
        assert status is not None and status["state"] == "finished"
        # phases are cut by the schedule: contiguous, and the measure phase is exactly measure_s long
        assert summaries[0]["end_ns"] == summaries[1]["start_ns"] and summaries[1]["end_ns"] == summaries[2]["start_ns"]
        assert summaries[1]["end_ns"] - summaries[1]["start_ns"] == int(cell.spec.workload.measure_s * 1e9)
        assert summaries[1]["sent"] > 0 and any("recv" in line for line in lines)
        landed = land_step(work)
        assert landed["status"] == "ok", landed["reason"]
        assert land_step(work) == landed  # a retried land does not land twice
        rows = pq.read_table(Lake(lake).cells_path(run)).to_pylist()
        assert len(rows) == 1 and rows[0]["cell_id"] == cell.id
        assert rows[0]["received"] == rows[0]["scheduled"] == 1000
        assert rows[0]["measure_end_ns"] - rows[0]["measure_start_ns"] == 1_000_000_000
        state = work.read(work.state)
        assert state is not None
        broker_pid = int(next(iter(state["brokers"]["nodes"].values())))
    finally:
        first = teardown_step(work)
    assert broker_pid in first["stopped"] and not _alive(broker_pid) and not _alive(generator)
    assert teardown_step(work)["stopped"] == []  # a second teardown finds nothing to do


def test_broker_killed_mid_measure_fails_the_cell_and_lands_it(tmp_path: Path, no_orphans: None) -> None:
    cell = prepare_cell(make_cell("e2e", measure_s=4))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    provision_when_free(cell, run, lake, work)
    generator = start_generator(work)
    watch_phase(work, "warmup", log=lambda _: None, poll_s=0.2)
    time.sleep(1)
    state = work.read(work.state)
    assert state is not None
    broker_pid = int(next(iter(state["brokers"]["nodes"].values())))
    os.kill(broker_pid, signal.SIGKILL)
    with pytest.raises(CellError, match="broker node 0"):
        watch_phase(work, "measure", log=lambda _: None, poll_s=0.2)
    landed = land_step(work)  # stops the generator, lands what it wrote
    print(f"\nreason: {landed['reason']}")
    assert landed["status"] == "failed" and "died during measure" in landed["reason"]
    faults = json.loads(Path(landed["path"], "result.json").read_text())["faults"]
    assert [(f["kind"], f["node"]) for f in faults] == [("undeclared-exit", 0)]  # the generator's watch saw it too
    assert not _alive(generator)
    teardown_step(work)
    (row,) = pq.read_table(Lake(lake).cells_path(run)).to_pylist()
    assert row["status"] == "failed" and row["sent"] is not None


def test_reuse_policy_shares_a_cluster_and_records_it(tmp_path: Path, no_orphans: None) -> None:
    from bench_tasks.cell.teardown import release_clusters

    first, second = (prepare_cell(make_cell("e2e", rate_per_s=r)) for r in (300, 400))
    run, lake, clusters = RunInfo.new(), tmp_path / "lake", tmp_path / "clusters"
    one, two = CellWork(tmp_path / "one"), CellWork(tmp_path / "two")
    assert not provision_when_free(first, run, lake, one, policy="reuse", clusters=clusters)["reused"]
    kept = teardown_step(one)["kept"]
    assert kept and all(_alive(pid) for pid in kept)  # kept for the next cell with the same broker spec
    assert provision_when_free(second, run, lake, two, policy="reuse", clusters=clusters)["reused"]
    start_generator(two)
    for phase in PHASES:
        watch_phase(two, phase, log=lambda _: None, poll_s=0.2)
    assert land_step(two)["status"] == "ok"
    assert teardown_step(two)["kept"] == kept
    (row,) = pq.read_table(Lake(lake).cells_path(run)).to_pylist()
    assert '"reused": true' in row["context_json"] and '"policy": "reuse"' in row["context_json"]
    assert release_clusters(clusters) == kept
    assert not any(_alive(pid) for pid in kept)


def test_cells_never_share_the_host(tmp_path: Path, no_orphans: None) -> None:
    """Whatever DAG or run they belong to: a second cell cannot provision while the first holds the host."""
    from bench_tasks.cell.hostlease import HostBusy

    first, second = (prepare_cell(make_cell("e2e", rate_per_s=r)) for r in (300, 400))
    run, lake = RunInfo.new(), tmp_path / "lake"
    one, two = CellWork(tmp_path / "one"), CellWork(tmp_path / "two")
    provision_when_free(first, run, lake, one)
    with pytest.raises(HostBusy, match=f"busy with cell one \\({one.root}"):
        provision_step(second, run, lake, two)
    assert not two.state.exists()  # nothing started
    teardown_step(one)
    provision_when_free(second, run, lake, two)  # free again (or soon: another test's cell)
    state = one.read(one.state)
    assert state is not None
    # a holder whose processes are all gone without a teardown (a crashed worker) is stale and taken over
    broker = int(next(iter(two.read(two.state)["brokers"]["nodes"].values())))  # type: ignore[index]
    os.kill(broker, signal.SIGKILL)
    provision_when_free(first, run, lake, one)
    teardown_step(one)
    teardown_step(two)


def test_told_so_a_cell_gives_the_host_back_once_its_generator_has_stopped(tmp_path: Path, no_orphans: None) -> None:
    """`SIXNINES_TEARDOWN_HOLDS_HOST=0`: the cell holds the host from before its brokers start until landing has
    stopped its generator; the next cell may then provision while the first's brokers still run. On a lease of the
    test's own (the other cell is this test's), while the test holds the suite's: in the suite's cell part a
    worker whose cell holds only a lease of its own runs idle beside the other workers' cells, and its cell
    failed as starved of CPU."""
    first, second = (prepare_cell(make_cell("e2e", rate_per_s=r)) for r in (300, 400))
    run, lake = RunInfo.new(), tmp_path / "lake"
    one, two = CellWork(tmp_path / "one"), CellWork(tmp_path / "two")
    with on_a_lease_of_its_own(tmp_path), pytest.MonkeyPatch.context() as env:
        env.setenv("SIXNINES_TEARDOWN_HOLDS_HOST", "0")
        try:
            _land_then_provision_the_next(first, second, run, lake, one, two)
        finally:
            for work in (one, two):
                teardown_step(work)
        assert live_holder() is None


def _land_then_provision_the_next(
    first: Cell, second: Cell, run: RunInfo, lake: Path, one: CellWork, two: CellWork
) -> None:
    """`first` through its phases and landing: the lease is free once it landed though its broker still runs, and
    `second` provisions (takes the lease) before `first`'s teardown, which stops that broker and leaves the lease."""
    provision_step(first, run, lake, one)
    assert (live_holder() or {}).get("work") == str(one.root)
    start_generator(one)
    for phase in PHASES:
        watch_phase(one, phase, log=lambda _: None, poll_s=0.1)
    landed = land_step(one)
    assert landed["status"] == "ok", landed["reason"]
    assert live_holder() is None
    broker = int(next(iter((one.read(one.state) or {})["brokers"]["nodes"].values())))
    assert _alive(broker)  # still up: its stop is teardown's, beside the next cell
    provision_step(second, run, lake, two)  # no HostBusy
    assert (live_holder() or {}).get("work") == str(two.root)
    teardown_step(one)
    assert not _alive(broker) and (live_holder() or {}).get("work") == str(two.root)  # not the other's lease


def test_a_held_generator_starts_beside_the_brokers_and_drives_once_released(tmp_path: Path, no_orphans: None) -> None:
    """Airflow's provision path: the generator starts once the cell is recorded, before its brokers, and drives
    only when released; the cell lands as one started after provision would."""
    cell = prepare_cell(make_cell("e2e"))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    held: list[int] = []
    provision_when_free(cell, run, lake, work, on_recorded=lambda plan: held.append(start_generator(work, held=True)))
    try:
        (pid,) = held
        assert _alive(pid) and work.read(work.status) is None  # waiting: nothing driven before the word
        release_generator(work, go=True)
        assert start_generator(work) == pid  # the warmup task finds it running
        for phase in PHASES:
            watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
        landed = land_step(work)
        assert landed["status"] == "ok", landed["reason"]
        rows = pq.read_table(Lake(lake).cells_path(run)).to_pylist()
        assert rows[0]["received"] == rows[0]["scheduled"] == 500  # 500 msg/s for the 1 s measure phase
    finally:
        teardown_step(work)
    assert not _alive(pid)


def test_a_held_generator_ends_without_driving_when_provision_fails(tmp_path: Path, no_orphans: None) -> None:
    """A provision that fails after the generator started (here: right after it) tells it no: it ends at once,
    drives nothing, and no generator is left on record for the watchers or teardown to find."""
    cell = prepare_cell(make_cell("e2e"))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    held: list[int] = []

    def hold_then_fail(plan: object) -> None:
        held.append(start_generator(work, held=True))
        raise RuntimeError("the brokers would not start")

    try:
        with pytest.raises(RuntimeError, match="would not start"):
            provision_when_free(cell, run, lake, work, on_recorded=hold_then_fail)
        release_generator(work, go=False)
        assert not _alive(held[0]) and work.read(work.generator) is None and work.read(work.status) is None
        assert "nothing to drive" in work.log.read_text()
    finally:
        teardown_step(work)


def test_the_next_cell_claims_a_standby_generator_and_it_drives_that_cell(tmp_path: Path, no_orphans: None) -> None:
    """Airflow's land starts a standby before the next cell is known; that cell's provision claims it instead of
    starting a generator, and it drives the cell as one started for it would: its log in the cell's folder, one
    landed row, nothing left after teardown. A second cell finds no standby left and starts its own."""
    standbys = tmp_path / "standby"
    standby = start_standby(standbys, base_env())
    cell = prepare_cell(make_cell("e2e"))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    held: list[int] = []
    hold = lambda plan: held.append(start_generator(work, held=True, standbys=standbys))  # noqa: E731
    provision_when_free(cell, run, lake, work, on_recorded=hold)
    try:
        assert held == [standby]
        release_generator(work, go=True)
        for phase in PHASES:
            watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
        landed = land_step(work)
        assert landed["status"] == "ok", landed["reason"]
        rows = pq.read_table(Lake(lake).cells_path(run)).to_pylist()
        assert rows[0]["received"] == rows[0]["scheduled"] == 500
        assert f"standby generator {standby} claimed for {work.root}" in work.log.read_text()
        assert "generator ok" in work.log.read_text()
    finally:
        teardown_step(work)
    assert not _alive(standby) and stop_standbys(standbys) == []
    second = CellWork(tmp_path / "second")
    provision_when_free(
        cell,
        run,
        lake,
        second,
        on_recorded=lambda plan: held.append(start_generator(second, held=True, standbys=standbys)),
    )
    try:
        assert held[1] != standby
        release_generator(second, go=False)
        assert not _alive(held[1]) and "nothing to drive" in second.log.read_text()
    finally:
        teardown_step(second)


def test_a_claimed_standby_ends_without_driving_when_provision_fails(tmp_path: Path, no_orphans: None) -> None:
    """The word a claimed standby waits for comes on its connection, as a held generator's on its stdin: no word
    (provision failed) and it ends at once, drives nothing, and leaves no generator on record."""
    standbys = tmp_path / "standby"
    standby = start_standby(standbys, base_env())
    cell = prepare_cell(make_cell("e2e"))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"

    def claim_then_fail(plan: object) -> None:
        assert start_generator(work, held=True, standbys=standbys) == standby
        raise RuntimeError("the brokers would not start")

    try:
        with pytest.raises(RuntimeError, match="would not start"):
            provision_when_free(cell, run, lake, work, on_recorded=claim_then_fail)
        release_generator(work, go=False)
        assert not _alive(standby) and work.read(work.generator) is None and work.read(work.status) is None
        assert "nothing to drive" in work.log.read_text()
    finally:
        teardown_step(work)
