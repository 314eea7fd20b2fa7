"""NATS Streaming cells end to end through the one cell path (run_cell): a real server per cell over loopback, the
harness's generator and the stan driver, landed in the lake, nothing left running. Each store carries every
message once; publishes are acknowledged; a killed file store loses no acknowledged message; a setting the server
refuses fails the cell naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.drive import Fault
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import ALL_PHASES_S, assert_every_send_acknowledged, make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")

RATE, MEASURE_S = 200, 1  # the helpers' warmup and cooldown around 1 s measured
ALL_PHASES = int(RATE * ALL_PHASES_S)  # what a cell lands over its three phases


@pytest.mark.parametrize(
    ("broker", "label", "file_sync"),
    [
        ({"store": "memory"}, "stan/memory", None),
        ({"store": "file"}, "stan/file sync", True),
        ({"store": "file", "file_sync": False}, "stan/file nosync", False),
    ],
    ids=["memory", "file_sync", "file_nosync"],
)
def test_each_store_carries_every_message_once(
    tmp_path: Path, console: Console, broker: dict, label: str, file_sync: bool | None
) -> None:
    cell = make_cell("e2e", broker, "stan", rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    assert cell.label.startswith(label)
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S
    assert acc.lost == acc.duplicated == acc.acknowledged_but_lost == 0
    e2e = report.analysis.metrics["e2e"]
    assert e2e["intended"].count == e2e["sent"].count == RATE * MEASURE_S
    assert 0 < e2e["sent"].max_ns < 5e9
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet")))
    assert received.num_rows == ALL_PHASES  # every phase's messages are landed
    assert sorted(received["offset"].to_pylist()) == list(range(1, ALL_PHASES + 1))  # the channel's sequences, once
    broker_context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert (broker_context["store"], broker_context["file_sync"]) == (broker["store"], file_sync)


def test_publish_cell_measures_the_pub_ack(tmp_path: Path, console: Console) -> None:
    cell = make_cell("publish", {"store": "file"}, "stan", rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_send_acknowledged(report, RATE * MEASURE_S)


def test_durable_queue_group_shares_the_messages(tmp_path: Path, console: Console) -> None:
    """Two consumers of one durable queue group, starting from the first message: each message reaches one of
    them once, and both get some."""
    client = {"durable": True, "start_position": "first", "max_in_flight": 64, "ack_wait_s": 5}
    cell = make_cell("e2e", {"store": "file"}, "stan", client=client, rate_per_s=RATE, measure_s=MEASURE_S, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    counts = [pq.read_table(p).num_rows for p in sorted(report.path.glob("received-c*.parquet"))]
    assert len(counts) == 2 and min(counts) > 0 and sum(counts) == ALL_PHASES


def test_killing_the_file_store_loses_no_acknowledged_message(tmp_path: Path, console: Console) -> None:
    """SIGKILL of the server mid-measure: what it acknowledged before it went was delivered; what was sent after
    is lost or failed, never counted as acknowledged."""
    client = {"pub_ack_wait_s": 2}  # what the server took but never acknowledged fails soon
    cell = make_cell("e2e", {"store": "file"}, "stan", client=client, rate_per_s=RATE, measure_s=3, drain_timeout_s=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=1.0)])

    assert report.faults and report.faults[0]["kind"] == "kill"
    acc = report.analysis.accounting
    print(f"\naccounting: {acc}")
    assert acc.acknowledged_but_lost == 0
    assert 0 < acc.acknowledged < acc.scheduled == RATE * 3  # the first second got through, the rest did not
    assert acc.received >= acc.acknowledged
    assert acc.received + acc.lost + acc.send_errors == acc.scheduled  # every message accounted for


def test_a_setting_the_server_refuses_fails_the_cell_naming_it(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", {"store": "memory", "streaming": {"hb_interval": "soon"}}, "stan", rate_per_s=50)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "streaming.hb_interval='soon'" in report.reason and 'invalid duration "soon"' in report.reason
