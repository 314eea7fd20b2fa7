"""Chronicle Queue cells end to end through the one cell path (run_cell): a real queue on tmpfs, real JVM workers
(the worker contract, docs/workers.md), landed in the lake, nothing left running; and the harness failing a cell
whose JVM worker was stopped or starved, naming it."""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.detached import start_generator, stop_generator
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.runner import run_cell
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import CellWork
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.load import cpushare
from bench_tasks.load.external import ExternalWorker

from .helpers import COOLDOWN_S, make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")

VERSION = "2026.4"
RATE, MEASURE_S = 2000, 1


def chronicle_cell(measurement: str = "e2e", broker: dict | None = None, **workload: object):
    base = {"message_size_bytes": 512, "rate_per_s": RATE, "measure_s": MEASURE_S, "warmup_s": 1.0}
    return make_cell(measurement, broker or {"storage": "tmpfs"}, "chronicle", VERSION, **{**base, **workload})


def test_e2e_cell_lands_every_message(tmp_path: Path, console: Console) -> None:
    cell = chronicle_cell()
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S
    assert acc.lost == acc.duplicated == 0
    received = pq.read_table(report.path / "received-c0.parquet")
    offsets = received["offset"].to_pylist()
    assert len(set(offsets)) == len(offsets) == RATE * (1.0 + MEASURE_S + COOLDOWN_S)  # every message once, each phase
    result = json.loads((report.path / "result.json").read_text())
    facts = result["harness"]["workers"]
    assert facts["consumer c0"]["runtime"] == "jvm" and facts["consumer c0"]["samples"] >= 3
    assert facts["producer p0"]["program"]["client"]["library"] == "chronicle-queue"
    assert "pauses" in facts["consumer c0"]
    assert result["context"]["broker"]["storage"] == "tmpfs"
    assert not Path(result["context"]["broker"]["root"]).exists()  # the keeper removed the queue with the cell
    assert (report.path / "worker-consumer-0.log").exists()


def test_publish_cell_on_disk_times_the_append(tmp_path: Path, console: Console) -> None:
    cell = chronicle_cell("publish", {"storage": "disk", "wait": "pauser", "roll_cycle": "FAST_DAILY"})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == RATE * MEASURE_S
    assert report.analysis.metrics["publish"]["sent"].count == RATE * MEASURE_S


@pytest.fixture
def worker_programs(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, ExternalWorker]]:
    """Every worker program a cell starts, by name, once it has started."""
    started: dict[str, ExternalWorker] = {}
    original = ExternalWorker.start

    def start(self: ExternalWorker) -> None:
        original(self)
        started[self.name] = self

    monkeypatch.setattr(ExternalWorker, "start", start)
    yield started


def test_a_stopped_jvm_consumer_fails_its_cell_and_is_named(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP the consumer's JVM for 1.5 s inside the measure phase: every message waits that long inside the
    harness, so the cell fails as harness saturation naming the consumer, never as Chronicle's latency."""
    cell = chronicle_cell(measure_s=3, rate_per_s=1000)
    original = ExternalWorker.begin

    def begin(self: ExternalWorker, t0_ns: int) -> None:
        original(self, t0_ns)
        if self.name == "consumer-0":
            at_s = (t0_ns - time.monotonic_ns()) / 1e9 + 1.0 + 0.5  # half a second into the measure phase
            threading.Timer(max(0.0, at_s), _stall, (self.pid, 1.5)).start()

    monkeypatch.setattr(ExternalWorker, "begin", begin)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "consumer c0 could not run for" in report.reason, report.reason
    assert report.analysis.accounting.lost == 0  # the queue kept every message: only the harness paused


def _stall(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.kill(pid, signal.SIGCONT)


@pytest.mark.skipif(cpushare.unavailable() is not None, reason=f"no CPU share here: {cpushare.unavailable()}")
def test_a_starved_jvm_consumer_fails_its_cell_and_is_named(tmp_path: Path, console: Console) -> None:
    """5 % of a CPU for the consumer's JVM (a cgroup quota, taken on once it is ready): it runs 5 ms of every 100 ms."""
    cell = chronicle_cell(measure_s=2, max_schedule_lag_ms=20, cpus={"receivers_share": 0.05})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "consumer c0" in report.reason and "harness saturated" in report.reason, report.reason


def test_a_cell_opens_no_connection_off_the_host(
    tmp_path: Path, console: Console, worker_programs: dict[str, ExternalWorker]
) -> None:
    """chronicle-analytics would report to a host on the internet when a queue opens: every worker JVM runs with
    the library's switch, and while the cell runs no worker has a socket to anywhere but this host."""
    seen: list[str] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.05):
            for worker in list(worker_programs.values()):
                try:
                    for conn in psutil.Process(worker.pid).net_connections(kind="inet"):
                        if conn.raddr and not ipaddress.ip_address(conn.raddr.ip).is_loopback:
                            seen.append(f"{worker.name} -> {conn.raddr.ip}:{conn.raddr.port}")
                except (psutil.NoSuchProcess, TypeError):
                    continue

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        report = run_cell(chronicle_cell(), Lake(tmp_path), RunInfo.new(), console)
    finally:
        stop.set()
        watcher.join()

    assert report.status == "ok", report.reason
    assert set(worker_programs) == {"producer-0", "consumer-0"}
    for worker in worker_programs.values():
        assert "-Dchronicle.analytics.disable=true" in worker.program.argv
    assert seen == []


def test_two_hop_chain_cell_lands_every_message_on_both_hops(tmp_path: Path, console: Console) -> None:
    """Seed 002's microservice: producer -> queue -> JVM relay (read, decode, write with its stamps) -> second
    queue -> consumer, every message measured from its original intended time."""
    cell = chronicle_cell("chain")
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    relayed = pq.read_table(report.path / "relayed-r0.parquet")
    final = pq.read_table(report.path / "received-c0.parquet")
    assert set(relayed["hop"].to_pylist()) == {1} and set(final["hop"].to_pylist()) == {2}
    assert relayed.num_rows == final.num_rows == RATE * (1.0 + MEASURE_S + COOLDOWN_S)
    rows = final.to_pylist()
    assert all(r["sent_ns"] < r["relay_received_ns"] < r["relay_sent_ns"] < r["received_ns"] for r in rows)


def test_a_killed_relay_fails_the_chain_cell(tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    cell = chronicle_cell("chain", measure_s=2)
    original = ExternalWorker.begin

    def begin(self: ExternalWorker, t0_ns: int) -> None:
        original(self, t0_ns)
        if self.name == "relay-0":
            at_s = (t0_ns - time.monotonic_ns()) / 1e9 + 1.0 + 0.5
            threading.Timer(max(0.0, at_s), os.kill, (self.pid, signal.SIGKILL)).start()

    monkeypatch.setattr(ExternalWorker, "begin", begin)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "relay-0 exited with code -9" in report.reason, report.reason


def test_a_declared_relay_stall_shows_in_the_cells_records(tmp_path: Path, console: Console) -> None:
    """`faults: [{action: stall, target: worker:relay-0}]` freezes the chain's relay JVM for 0.6 s: the messages
    wait in the first queue, so the stall is in the cell's tail and its fault record, the relay's pause is put
    down to the fault rather than judged as the harness's saturation, and the queue loses nothing."""
    stall = {"at_s": 1.0, "action": "stall", "target": "worker:relay-0", "duration_s": 0.6}
    cell = chronicle_cell("chain", measure_s=3, rate_per_s=1000, faults=[stall])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    (fired,) = report.faults
    assert fired["kind"] == "stall" and fired["target"] == "worker:relay-0"
    assert 0.6e9 <= fired["end_ns"] - fired["start_ns"] < 1.0e9
    assert report.analysis.metrics["e2e"]["intended"].max_ns >= 0.55e9  # the CTRL+Z test, on the relay
    assert report.analysis.metrics["hop1"]["intended"].max_ns >= 0.55e9  # waiting in the first queue
    assert report.analysis.accounting.lost == report.analysis.accounting.duplicated == 0
    relay = json.loads((report.path / "result.json").read_text())["harness"]["workers"]["relay r0"]
    assert relay["pauses"]["declared"]["count"] >= 1 and relay["pauses"]["declared"]["max_ms"] >= 550
    assert relay["pauses"]["max_ms"] < 550  # the stall is not also counted as the harness's own


def test_a_declared_relay_kill_fails_the_chain_cell(tmp_path: Path, console: Console) -> None:
    """The declared-fault path of a relay kill (the matrix's `faults:`, not a signal sent from the test)."""
    kill = {"at_s": 0.5, "action": "kill", "target": "worker:relay-0"}
    cell = chronicle_cell("chain", measure_s=2, faults=[kill])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "relay-0 exited with code -9 (killed by a declared fault)" in report.reason, report.reason
    assert [(f["kind"], f["target"]) for f in report.faults] == [("kill", "worker:relay-0")]


def test_a_cell_stopped_mid_measure_lands_what_its_jvm_workers_wrote(tmp_path: Path) -> None:
    """The path of an Airflow phase watcher that fails a cell: the detached generator is stopped (SIGTERM) in the
    measure phase. Its JVM workers are told to stop, write their sample files and say done; those files are the
    lake's before the workers' scratch folder goes, so the failed cell lands the messages it did send."""
    cell = prepare_cell(chronicle_cell(measure_s=4))
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"
    provision_when_free(cell, run, lake, work)
    try:
        start_generator(work)
        watch_phase(work, "warmup", log=lambda _: None, poll_s=0.2)
        time.sleep(1)
        stop_generator(work)
        landed = land_step(work)
        assert landed["status"] == "failed" and "stopped by signal" in landed["reason"], landed["reason"]
        sent = pq.read_table(Path(landed["path"]) / "sent-p0.parquet").num_rows
        received = pq.read_table(Path(landed["path"]) / "received-c0.parquet").num_rows
        assert sent >= RATE * 1.5 and received >= RATE * 1.5  # the warmup and a second of the measure phase
    finally:
        teardown_step(work)
