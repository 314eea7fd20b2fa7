"""Real Kafka cells (KRaft clusters from Maven Central jars, and a ZooKeeper-era release with its ZooKeeper): acks
levels, keys, loss, leader failure, leader placement and the controller as a fault's target."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.drive import Fault
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import listed_kafka, make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")
NEWEST = newest_kafka()
PHASES = {"warmup_s": 2, "measure_s": 1, "cooldown_s": 1, "drain_timeout_s": 5}
# The node on one CPU, the clients on the other, as hosts of their own would have them. These tests judge acks,
# keys and accounting, not latency; unpinned, a clean-clone run failed the acks=all cell as harness saturated
# (the broker's fresh JVM beside the clients: the consumer's thread waited for a CPU 10 % of the 1 s measure
# phase, 1.1 ms per wake-up).
APART = {"broker": [0], "producers": [1], "receivers": [1]}


def _table(folder: Path, pattern: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob(pattern))])


@pytest.mark.parametrize(("acks", "keys"), [("0", "none"), ("1", "round_robin"), ("all", "per_producer")])
def test_single_broker_acks_and_keys(acks: str, keys: str, tmp_path: Path, console: Console) -> None:
    cell = make_cell(
        "e2e",
        system="kafka",
        version=NEWEST,
        broker={"brokers": 1, "partitions": 4},
        client={"producer": {"acks": acks}, "keys": keys},
        rate_per_s=400,
        producers=2,
        cpus=APART,
        **PHASES,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.received == 400
    assert acc.acknowledged == 400 and acc.lost == 0 and acc.duplicated == 0
    sent = _table(report.path, "sent-p*.parquet")
    received = _table(report.path, "received-c*.parquet")
    if acks == "0":  # nobody answers, so the broker's offset is unknown to the producer
        assert pc.all(pc.is_null(sent["offset"])).as_py()
    else:
        assert pc.all(pc.is_valid(sent["offset"])).as_py()
    partitions = sent["partition"].to_numpy()
    seqs, producers = sent["seq"].to_numpy(), sent["producer_id"].to_numpy()
    if keys == "round_robin":
        assert (partitions == seqs % 4).all()
    if keys == "per_producer":  # one key per producer: all of a producer's messages in one partition
        for producer in (0, 1):
            assert len(set(partitions[producers == producer].tolist())) == 1
    assert pc.all(pc.is_valid(received["leader"])).as_py()
    (node,) = json.loads((report.path / "result.json").read_text())["context"]["broker"]["nodes"]
    assert set(received["leader"].to_pylist()) == {node["node_id"]}  # the only broker leads everything
    assert set(report.analysis.metrics) == {"e2e", "publish"}


def test_killed_single_broker_is_counted_as_loss(tmp_path: Path, console: Console) -> None:
    cell = make_cell(
        "e2e",
        system="kafka",
        version=NEWEST,
        client={"producer": {"acks": "1", "message.timeout.ms": 3000}},
        rate_per_s=300,
        warmup_s=3,
        measure_s=3,
        cooldown_s=1,
        drain_timeout_s=3,
        request_timeout_s=5,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=1.0)])

    acc = report.analysis.accounting
    assert acc.scheduled == 900
    assert 0 < acc.received < acc.scheduled
    assert acc.received + acc.lost + acc.send_errors == acc.scheduled  # every message accounted for
    # acks=1 on a broker that never comes back: what it acknowledged but no consumer had fetched yet is gone.
    # That count is a result (it may be 0 or not); it must match the raw samples, counted independently here.
    sent = _table(report.path, "sent-p*.parquet").to_pandas()
    received = _table(report.path, "received-c*.parquet").to_pandas()
    measured = sent[(sent.phase == "measure") & sent.acked_ns.notna()]
    got = set(zip(received.producer_id, received.seq, strict=True))
    acked_lost = sum((p, q) not in got for p, q in zip(measured.producer_id, measured.seq, strict=True))
    assert acc.acknowledged_but_lost == acked_lost
    assert acc.acknowledged == len(measured)
    # the leader watch could not ask a dead broker: each failed poll is counted with the cell, not swallowed
    errors = json.loads((report.path / "result.json").read_text())["context"]["broker"]["leader_poll_errors"]
    assert errors["count"] > 0 and errors["last"], errors


@pytest.mark.usefixtures("kafka_first_tier")
def test_leader_kill_with_rf3_loses_nothing_acknowledged(tmp_path: Path, console: Console) -> None:
    cell = make_cell(
        "e2e",
        system="kafka",
        version=NEWEST,
        broker={"brokers": 3, "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
        client={"producer": {"acks": "all", "enable.idempotence": True}},
        rate_per_s=300,
        warmup_s=4,
        measure_s=6,
        cooldown_s=2,
        drain_timeout_s=10,
        request_timeout_s=30,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("kill", at_s=2.0)])

    acc = report.analysis.accounting
    assert acc.acknowledged > 0
    assert acc.acknowledged_but_lost == 0
    changes = json.loads((report.path / "result.json").read_text())["context"]["broker"]["leader_changes"]
    leaders = [c["leader"] for c in changes if c["partition"] == 0]
    assert len(set(leaders)) >= 2, changes  # the first leader died and another took over
    received = _table(report.path, "received-c*.parquet")
    assert len(set(received["leader"].drop_null().to_pylist())) >= 2  # samples can be cut by leader


def test_lagging_consumer_reads_the_backlog_while_the_measured_stream_runs(tmp_path: Path, console: Console) -> None:
    cell = make_cell(
        "e2e",
        system="kafka",
        version=NEWEST,
        broker={"brokers": 1, "partitions": 2},
        rate_per_s=300,
        prefill_messages=20_000,
        lagging_consumers=1,
        **PHASES,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == 300 and acc.lost == 0  # the backlog is never counted as samples
    result = json.loads((report.path / "result.json").read_text())
    assert result["lagging_consumed"] > 0  # the lagging consumer did read the backlog
    received = _table(report.path, "received-c*.parquet")
    assert set(received["producer_id"].to_pylist()) == {0}


@pytest.mark.usefixtures("kafka_first_tier")
def test_a_zookeeper_era_cell_places_attributes_and_stalls_its_controller(tmp_path: Path, console: Console) -> None:
    """3.2.3, the last release before KRaft: the leader placed on node 2, every sample attributed to it, the
    controller (the broker elected in ZooKeeper) stalled without losing anything acknowledged, and the ZooKeeper
    recorded, kept in the broker logs and stopped with the nodes."""
    stall = {"at_s": 0.3, "action": "stall", "target": "controller", "duration_s": 0.3}
    cell = make_cell(
        "e2e",
        system="kafka",
        version=listed_kafka("3.2.3"),
        broker={"brokers": 3, "partitions": 1, "replication_factor": 3, "leader": "node:2"},
        client={"producer": {"acks": "all"}},
        rate_per_s=200,
        faults=[stall],
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert broker["mode"] == "zookeeper" and broker["zookeeper"]["version"] == "3.6.3"
    changes = broker["leader_changes"]
    assert [c["leader"] for c in changes if c["partition"] == 0] == [2]
    assert set(_table(report.path, "received-c*.parquet")["leader"].to_pylist()) == {2}
    (fault,) = report.faults
    assert (fault["kind"], fault["target"]) == ("stall", "controller") and fault["node"] in (1, 2, 3)
    assert report.analysis is not None and report.analysis.accounting.acknowledged_but_lost == 0
    assert list((tmp_path / "raw").rglob("broker-zookeeper.log"))  # kept with the cell, like the nodes' logs
