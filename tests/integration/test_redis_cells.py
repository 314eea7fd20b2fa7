"""Redis cells end to end through the one cell path (run_cell): a real redis-server per cell over loopback, the
harness's generator and the redis-py/hiredis driver, landed in the lake, nothing left running."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.drive import Fault
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import MatrixError

from .helpers import (
    ALL_PHASES_S,
    assert_every_request_answered,
    assert_every_send_acknowledged,
    make_cell,
)

pytestmark = pytest.mark.usefixtures("no_orphans")

RATE, MEASURE_S = 300, 1  # the helpers' warmup and cooldown around 1 s measured


def test_pubsub_e2e_cell_lands_every_message(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", {"mode": "pubsub"}, "redis", rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.received == RATE * MEASURE_S
    assert acc.lost == acc.duplicated == 0
    e2e = report.analysis.metrics["e2e"]
    assert e2e["intended"].count == e2e["sent"].count == RATE * MEASURE_S
    assert 0 < e2e["sent"].max_ns < 5e9
    context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert context["version"] == cell.spec.version and context["mode"] == "pubsub"


def test_streams_e2e_cell_reads_every_entry_once(tmp_path: Path, console: Console) -> None:
    """XADD (MAXLEN ~) acknowledged by its entry id, read by a group of two consumers with XREADGROUP and XACK."""
    broker = {"mode": "streams", "stream": {"maxlen": 10_000}}
    cell = make_cell("e2e", broker, "redis", consumers=2, rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet")))
    assert set(received["partition"].to_pylist()) == {0}
    offsets = received["offset"].to_pylist()
    assert len(set(offsets)) == len(offsets) == RATE * ALL_PHASES_S  # every entry, once


@pytest.mark.parametrize(("system", "version"), [("redis", "latest"), ("valkey", "8.1.8")])
def test_streams_publish_cell_measures_the_xadd_reply(
    tmp_path: Path, console: Console, system: str, version: str
) -> None:
    """Redis, and Valkey (a system of its own on the same driver): the XADD reply acknowledges every send."""
    cell = make_cell("publish", {"mode": "streams"}, system, version, rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_send_acknowledged(report, RATE * MEASURE_S)
    context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert context["version"] == cell.spec.version
    assert system == "redis" or context["nodes"][0]["server"]["server_name"] == "valkey"


@pytest.mark.parametrize("version", ["6.2.14"])  # latest runs in every other test here
def test_rtt_cell_round_trips_over_pubsub(tmp_path: Path, console: Console, version: str) -> None:
    """Seed 000's request/reply: each request on its requester's channel, echoed on its reply channel."""
    cell = make_cell("rtt", {"mode": "pubsub"}, "redis", version, rate_per_s=200, measure_s=MEASURE_S, connections=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_request_answered(report, 200 * MEASURE_S)
    context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert context["version"] == version


def test_killed_server_is_counted_as_pubsub_loss(tmp_path: Path, console: Console) -> None:
    """The engine's kill fault SIGKILLs the server mid-measure: what was published before got through, what was in
    flight is lost and every later send is refused; every message is accounted for."""
    cell = make_cell(
        "e2e", {"mode": "pubsub"}, "redis", rate_per_s=500, warmup_s=1, measure_s=3, cooldown_s=1, drain_timeout_s=2
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=1.0)])

    assert report.faults and report.faults[0]["kind"] == "kill"
    acc = report.analysis.accounting
    assert acc.scheduled == 1500
    assert acc.received > 0  # the first second of measure got through
    assert acc.lost + acc.send_errors > 0.4 * acc.scheduled  # the last two seconds did not
    assert acc.received + acc.lost + acc.send_errors == acc.scheduled  # every message accounted for
    assert (report.path / "broker.log").exists()


def test_a_bad_setting_is_named() -> None:
    with pytest.raises(MatrixError, match=r"workload.consumers 2: pub/sub delivers every message"):
        make_cell("e2e", {"mode": "pubsub"}, "redis", consumers=2)
    with pytest.raises(MatrixError, match=r"server.port: set by the harness"):
        make_cell("e2e", {"server": {"port": 6379}}, "redis")
    with pytest.raises(MatrixError, match=r"measurement 'publish' needs broker.mode 'streams'"):
        make_cell("publish", {"mode": "pubsub"}, "redis")
