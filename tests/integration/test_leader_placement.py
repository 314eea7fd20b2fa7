"""`broker.leader: node:N` on real clusters: the measured route is led by node N before the measure phase, and
every received sample is attributed to N by the cell's leader timeline (seed 001: one broker as leader)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.brokers.patience import with_patience
from bench_tasks.cell.runner import run_cell
from bench_tasks.errors import BrokerError
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")


def _attributed_leaders(report_path: Path) -> tuple[list[int], set[int | None]]:
    """Partition 0's leaders in the timeline, and the leaders the received samples carry."""
    changes = json.loads((report_path / "result.json").read_text())["context"]["broker"]["leader_changes"]
    received = pq.read_table(sorted(report_path.glob("received-c*.parquet")))
    return [c["leader"] for c in changes if c["partition"] == 0], set(received["leader"].to_pylist())


@pytest.mark.usefixtures("kafka_first_tier")
def test_kafka_rf3_leader_on_node_3(tmp_path: Path, console: Console) -> None:
    broker = {"brokers": 3, "partitions": 1, "replication_factor": 3, "leader": "node:3"}
    client = {"producer": {"acks": "all"}}
    cell = make_cell("e2e", broker, system="kafka", client=client, rate_per_s=200, warmup_s=1, measure_s=1)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    timeline, sampled = _attributed_leaders(report.path)
    assert timeline == [3] and sampled == {3}
    assert report.analysis is not None and report.analysis.accounting.received == 200


def test_jetstream_r3_leader_on_node_2(tmp_path: Path, console: Console) -> None:
    broker = {"mode": "jetstream", "servers": 3, "replicas": 3, "leader": "node:2"}
    cell = make_cell("e2e", broker, rate_per_s=200, warmup_s=1, measure_s=1)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    timeline, sampled = _attributed_leaders(report.path)
    assert timeline[-1] == 2 and sampled == {2}
    assert report.analysis is not None and report.analysis.accounting.received == 200


@pytest.mark.alongside
def test_jetstream_step_downs_move_an_r3_stream_leader_to_each_node(tmp_path: Path) -> None:
    """The stream's leader is moved to node 1, 2, 3 in turn (at least two of them by step-down), each time seen so
    by the nodes' monitor ports as well as the JetStream API, within the bounded attempts."""
    import asyncio

    import nats
    from nats.js.api import StreamConfig

    from bench_tasks.systems.nats.cluster import NatsCluster
    from bench_tasks.systems.nats.placement import place_stream_leader
    from bench_tasks.systems.nats.release import bundled_version
    from bench_tasks.systems.nats.settings import NatsBroker

    async def place_on_each(url: str) -> list[tuple[int, int]]:
        nc = await nats.connect(url.split(","))
        try:
            await nc.jetstream().add_stream(StreamConfig(name="PLACED", subjects=["placed"], num_replicas=3))
            placed = [(node, await place_stream_leader(nc, "PLACED", node)) for node in (1, 2, 3)]
            with pytest.raises(BrokerError, match=r"stream 'PLACED' is led by node 3 after 0 leader step-downs"):
                await place_stream_leader(nc, "PLACED", 1, attempts=0)  # out of attempts: names who leads
            return placed
        finally:
            await nc.close()

    broker = NatsBroker(mode="jetstream", servers=3, replicas=3)
    with NatsCluster(bundled_version(), broker, tmp_path) as cluster:
        assert cluster.endpoint is not None
        placed = asyncio.run(place_on_each(cluster.endpoint.url))
        print(f"\n(node, step-downs): {placed}")
        assert cluster.stream_leader("PLACED") == 3
    assert sum(steps for _, steps in placed) >= 2 and all(steps <= 8 for _, steps in placed)


@pytest.mark.alongside
def test_kafka_places_every_partition_on_the_leader_and_names_another_that_leads(tmp_path: Path) -> None:
    """Node 2 first in each replica list leads every partition; a topic whose preferred leader is another node is
    not moved by the preferred-leader election, and the refusal names the node that leads."""
    from bench_tasks.systems.kafka.admin import create_topic, partition_leaders
    from bench_tasks.systems.kafka.cluster import KafkaCluster
    from bench_tasks.systems.kafka.placement import ensure_leader, leader_assignment

    with KafkaCluster(newest_kafka(), 3, {}, tmp_path / "kafka") as cluster:
        assert cluster.endpoint is not None
        bootstrap = cluster.endpoint.bootstrap_servers
        create_topic(bootstrap, "placed", 2, 3, assignment=leader_assignment(3, 2, 3, 2))
        ensure_leader(bootstrap, "placed", 2)
        assert partition_leaders(bootstrap, "placed") == {0: 2, 1: 2}
        create_topic(bootstrap, "elsewhere", 1, 3, assignment=[[1, 2, 3]])
        create_topic(bootstrap, "elsewhere", 1, 3, assignment=[[1, 2, 3]])  # a resent request: its own topic
        with pytest.raises(BrokerError, match=r"exists with replicas \[\(0, \[1, 2, 3\]\)\], not"):
            create_topic(bootstrap, "elsewhere", 1, 3, assignment=[[2, 1, 3]])
        with pytest.raises(BrokerError, match=r"partition 0 of topic 'elsewhere' is led by node 1 after a preferred"):
            ensure_leader(bootstrap, "elsewhere", 3, timeout_s=with_patience(2))  # its answer comes at idle priority
