"""Real ZooKeeper-era Kafka clusters (releases before 3.3) from Maven Central jars, with the ZooKeeper of their own
classpath: brokers that serve, attribute and place leaders, name their controller and fail over; SCRAM users written
into ZooKeeper; `sixnines brokers up/down` of three nodes; and every process, ZooKeeper included, gone after."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench_tasks.systems.kafka.admin import create_topic, metadata_controller, partition_leaders
from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.kafka.placement import ensure_leader, leader_assignment
from bench_tasks.systems.kafka.release import kafka_classpath
from bench_tasks.systems.kafka.zookeeper import MAIN_CLASS as ZOOKEEPER_CLASS

from .test_kafka_brokers import assert_gone, round_trip, wait_for_leaders_without

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]

OLDEST = "2.4.0"  # the first kafka_2.13 release: ZooKeeper 3.5.6, Scala 2.13.1, on today's JVM
LAST_ZOOKEEPER_ERA = "3.2.3"  # the last release line before KRaft was ready for production
# ZooKeeper's shortest session (two ticks): a killed broker is declared dead in 4 s instead of 18 s.
SHORT_SESSION = {"zookeeper.session.timeout.ms": 4000}
SMALL_HEAP = ("-Xms512m", "-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1")


def test_three_brokers_of_the_oldest_release_serve_place_leaders_and_name_their_controller(tmp_path: Path) -> None:
    kafka_classpath(OLDEST)  # fetched (or verified) outside the start's timeout
    with KafkaCluster(OLDEST, 3, SHORT_SESSION, tmp_path, jvm_opts=SMALL_HEAP) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None and endpoint.mode == "zookeeper" and endpoint.version == OLDEST
        zookeeper = endpoint.zookeeper
        assert zookeeper is not None and zookeeper["version"] == "3.5.6"  # the release's own dependency
        assert cluster.companions() == [(zookeeper["pid"], ZOOKEEPER_CLASS)]
        assert f"zookeeper.connect={zookeeper['connect']}" in endpoint.nodes[0].server_properties
        assert all(node.controller_port is None for node in endpoint.nodes)
        bootstrap = endpoint.bootstrap_servers

        create_topic(bootstrap, "placed", 2, 3, {"min.insync.replicas": 2}, assignment=leader_assignment(3, 2, 3, 3))
        ensure_leader(bootstrap, "placed", 3)
        assert partition_leaders(bootstrap, "placed") == {0: 3, 1: 3}  # what samples are attributed to
        round_trip(bootstrap, "placed")

        controller = metadata_controller(bootstrap)
        assert controller is not None and _logged_election(endpoint, controller)
        zookeeper_pid = zookeeper["pid"]
        cluster.kill(3)  # the leader: ZooKeeper expires its session, the controller moves its partitions
        survivors = ",".join(f"127.0.0.1:{port}" for node, port in endpoint.ports.items() if node != 3)
        assert set(wait_for_leaders_without(survivors, "placed", 3, timeout_s=30).values()) <= {1, 2}
        pids = [*cluster.node_pids.values(), zookeeper_pid]
    assert_gone(pids)


def _logged_election(endpoint: object, node_id: int) -> bool:
    """ZooKeeper-era brokers log `[Controller id=N] N successfully elected as the controller`."""
    (node,) = [n for n in endpoint.nodes if n.node_id == node_id]  # type: ignore[attr-defined]
    return re.search(rf"{node_id} successfully elected as the controller", Path(node.log_path).read_text()) is not None


def test_scram_users_are_written_into_zookeeper_before_the_brokers_start(tmp_path: Path) -> None:
    """SCRAM users that Kafka's ConfigCommand writes into the cluster's ZooKeeper; the brokers log in to each
    other, and the client to them, with them."""
    version = "2.8.2"
    kafka_classpath(version)
    cluster = KafkaCluster(
        version, 1, {}, tmp_path, jvm_opts=SMALL_HEAP, security="sasl_plaintext", sasl_mechanism="SCRAM-SHA-512"
    )
    with cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None and endpoint.security["sasl_mechanism"] == "SCRAM-SHA-512"
        client = cluster.client_config
        create_topic(endpoint.bootstrap_servers, "secured", 1, 1, client=client)
        _round_trip_as(endpoint.bootstrap_servers, "secured", client)
        assert not list(tmp_path.rglob("tool.args"))  # the passwords' argument files are gone
    assert_gone([*cluster.node_pids.values(), endpoint.zookeeper["pid"]])  # type: ignore[index]


def _round_trip_as(bootstrap: str, topic: str, client: dict[str, str]) -> None:
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", **client})
    producer.produce(topic, b"as a SCRAM user")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "z", "auto.offset.reset": "earliest", **client})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while (msg := consumer.poll(0.5)) is None or msg.error() is not None:
            assert time.monotonic() < deadline, "nothing consumed"
        assert msg.value() == b"as a SCRAM user"
    finally:
        consumer.close()


def sixnines(*args: str, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SIXNINES_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_brokers_up_and_down_of_three_zookeeper_era_nodes_leave_nothing_behind(tmp_path: Path) -> None:
    shared = kafka_classpath(LAST_ZOOKEEPER_ERA).parent.parent  # the fetched releases; broker state stays private
    (tmp_path / "kafka").symlink_to(shared, target_is_directory=True)
    up = sixnines("brokers", "up", "kafka", "--version", LAST_ZOOKEEPER_ERA, "--brokers", "3", cache=tmp_path)
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "brokers" / "kafka.json").read_text())
    (zookeeper_pid, name), *_ = state["companions"]
    pids = [*state["nodes"].values(), zookeeper_pid]
    try:
        assert name == ZOOKEEPER_CLASS and state["vital_companions"] == [zookeeper_pid]
        status = sixnines("brokers", "status", "kafka", cache=tmp_path)
        assert "nodes alive 3/3" in status.stdout and "ZooKeeper 3.6.3 at 127.0.0.1:" in status.stdout
    finally:
        down = sixnines("brokers", "down", "kafka", cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
