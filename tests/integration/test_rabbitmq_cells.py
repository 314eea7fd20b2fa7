"""RabbitMQ cells end to end through the one cell path (run_cell): a real node per cell over loopback, the
harness's generator and pika driver, landed in the lake, nothing left running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.drive import Fault
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import (
    ALL_PHASES_S,
    assert_every_request_answered,
    assert_every_send_acknowledged,
    make_cell,
)

pytestmark = pytest.mark.usefixtures("no_orphans")

RATE, MEASURE_S = 300, 1  # the helpers' warmup and cooldown around 1 s measured


def _erlang_of(run: RunInfo) -> set[int]:
    """The run's Erlang processes: its nodes' VMs and their helpers (their environment names the cell's folder,
    under the run's id) and any epmd this process started. Other tests' nodes run beside this one in the suite."""
    return {p.pid for p in psutil.process_iter(["name", "environ", "ppid"]) if _of_run(p.info, run)}


def _of_run(info: dict, run: RunInfo) -> bool:
    if info["name"] == "epmd":
        return info["ppid"] == os.getpid()
    return run.run_id in (info["environ"] or {}).get("RABBITMQ_MNESIA_BASE", "")


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
def test_one_node_e2e_cell_lands_every_message(tmp_path: Path, console: Console, queue_type: str) -> None:
    cell = make_cell("e2e", broker={"queue_type": queue_type}, system="rabbitmq", rate_per_s=RATE, measure_s=MEASURE_S)
    run = RunInfo.new()
    report = run_cell(cell, Lake(tmp_path), run, console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S  # the measured phase
    assert acc.lost == acc.duplicated == 0
    e2e = report.analysis.metrics["e2e"]
    assert e2e["intended"].count == e2e["sent"].count == RATE * MEASURE_S
    assert 0 < e2e["sent"].max_ns < 5e9
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet")))
    assert received.num_rows == RATE * ALL_PHASES_S  # every phase's messages are landed
    # A quorum queue has a leader: samples are attributed to partition 0; a classic queue has no partition.
    partitions = set(received["partition"].to_pylist()) if "partition" in received.column_names else {None}
    assert partitions == ({0} if queue_type == "quorum" else {None})
    assert _erlang_of(run) == set()  # the cell's node, its helpers and its epmd are gone


def test_publish_cell_measures_confirms(tmp_path: Path, console: Console) -> None:
    cell = make_cell("publish", system="rabbitmq", rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_send_acknowledged(report, RATE * MEASURE_S)


def test_rtt_cell_round_trips_through_a_queue(tmp_path: Path, console: Console) -> None:
    """Seed 000's request: each request goes through the cell's queue to a responder and back by direct reply-to."""
    cell = make_cell("rtt", system="rabbitmq", rate_per_s=200, measure_s=MEASURE_S, connections=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_request_answered(report, 200 * MEASURE_S)


def test_stream_e2e_cell_reads_from_next_offset(tmp_path: Path, console: Console) -> None:
    """A stream consumer acks manually with a prefetch (RabbitMQ requires both) and starts at the next offset."""
    client = {"acks": "manual", "prefetch": 200}
    cell = make_cell("e2e", {"queue_type": "stream"}, "rabbitmq", client=client, rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet")))
    offsets = sorted(received["offset"].to_pylist())
    assert offsets == list(range(offsets[0], offsets[0] + received.num_rows))  # every stream offset, once


def test_three_node_quorum_cell_attributes_samples_to_the_queue_leader(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", {"nodes": 3, "queue_type": "quorum"}, "rabbitmq", rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S and acc.lost == 0
    context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert [n["index"] for n in context["nodes"]] == [1, 2, 3] and context["version"] == cell.spec.version
    (first, *_) = context["leader_changes"]
    assert first["partition"] == 0 and first["leader"] in (1, 2, 3)
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet")))
    assert set(received["leader"].to_pylist()) <= {1, 2, 3} and received["leader"].null_count == 0


def test_killing_the_quorum_leader_loses_no_confirmed_message(tmp_path: Path, console: Console) -> None:
    """Issue 17's leader kill: a 3-node quorum queue's leader is SIGKILLed mid-measure; clients on it reconnect to
    another node, a new leader is elected, and every message the broker confirmed is still delivered (manual acks:
    what was in flight to a lost consumer connection is redelivered, counted as a duplicate, never as lost)."""
    broker = {"nodes": 3, "queue_type": "quorum"}
    client = {"acks": "manual", "prefetch": 100}
    cell = make_cell(
        "e2e",
        broker,
        "rabbitmq",
        client=client,
        rate_per_s=200,
        warmup_s=1,
        measure_s=10,
        cooldown_s=1,
        drain_timeout_s=15,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=2.0)])

    assert report.faults, f"the kill never fired: the cell {report.status} before it ({report.reason})"
    assert report.faults[0]["kind"] == "kill"
    changes = json.loads((report.path / "result.json").read_text())["context"]["broker"]["leader_changes"]
    acc = report.analysis.accounting
    killed_at = report.faults[0]["start_ns"]
    print(f"\nleader changes: {changes}\nkilled at {killed_at}\naccounting: {acc}")
    assert len(changes) >= 2 and changes[0]["at_ns"] < killed_at < changes[-1]["at_ns"]
    assert changes[-1]["leader"] != changes[0]["leader"]
    assert acc.acknowledged_but_lost == 0
    assert acc.received >= acc.acknowledged > 0
    sent = pq.read_table(sorted(report.path.glob("sent-p*.parquet")))
    acked_at = [t for t in sent["acked_ns"].to_pylist() if t is not None]
    assert max(acked_at) > changes[-1]["at_ns"]  # publishing resumed under the new leader


def test_two_hop_chain_and_background_traffic(tmp_path: Path, console: Console) -> None:
    """Seed 002's chain (producer -> relays -> consumers, each hop its own queue) with seed 004's background
    producers on a queue of their own, beside it on the same node."""
    background = {
        "traffic": {"message_size_bytes": 1024, "rate_per_producer_per_s": 2, "producers": 20, "consumers": 1}
    }
    cell = make_cell("chain", system="rabbitmq", background=background, rate_per_s=200, relays=2, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.relayed == acc.received == 200 and acc.lost == acc.duplicated == 0
    assert set(report.analysis.metrics) >= {"e2e", "hop1", "hop2"}
    traffic = json.loads((report.path / "result.json").read_text())["background"]["traffic"]
    assert traffic["sent"] == traffic["scheduled"] == 20 * 2 * ALL_PHASES_S and traffic["errors"] == 0
    assert 0 < traffic["consumed"] <= traffic["sent"]


def test_stalling_the_quorum_leader_shows_in_the_max_and_loses_nothing(tmp_path: Path, console: Console) -> None:
    """The CTRL+Z test on a 3-node quorum queue: its leader frozen (SIGSTOP) for 1.5 s mid-measure; the stall is in
    the response-time max, and no confirmed message is lost."""
    broker = {"nodes": 3, "queue_type": "quorum"}
    client = {"acks": "manual", "prefetch": 100}
    cell = make_cell(
        "e2e", broker, "rabbitmq", client=client, rate_per_s=200, measure_s=5, cooldown_s=1, drain_timeout_s=15
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("stall", 1.0, 1.5)])

    assert report.faults and report.faults[0]["kind"] == "stall"
    acc = report.analysis.accounting
    print(f"\naccounting: {acc}\ne2e max {report.analysis.metrics['e2e']['intended'].max_ns / 1e9:.2f} s")
    assert report.status == "ok", report.reason
    assert acc.sent == acc.acknowledged == acc.received == 1000 and acc.lost == acc.acknowledged_but_lost == 0
    assert report.analysis.metrics["e2e"]["intended"].max_ns >= 1.0e9  # the stall is in the max, not hidden
