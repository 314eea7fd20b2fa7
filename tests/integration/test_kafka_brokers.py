"""Real Apache Kafka KRaft clusters from Maven Central jars: start, serve, fail over, stop, leave no JVM.

Each release is fetched once per session into the shared cache (verified on every use); clusters are
context managers, so a failing assertion still stops every node.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import psutil
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from bench_tasks.errors import BrokerError
from bench_tasks.systems.kafka.admin import create_topic, delete_topic, partition_leaders
from bench_tasks.systems.kafka.classdata import make_archive
from bench_tasks.systems.kafka.cluster import KafkaCluster, stop_detached
from bench_tasks.systems.kafka.quorum import active_controller, quorum_state_file
from bench_tasks.systems.kafka.release import OLDEST, kafka_classpath, list_releases, release_of
from tests.host_turns import holding_the_host

from .helpers import FIRST_TIER_ONLY, newest_kafka

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]

NEWEST = newest_kafka()  # the newest release that can be assembled; a 3.x KRaft release runs below too
KRAFT_3 = "3.6.2"  # a KRaft release of the 3.x line (`controller.quorum.voters`, reload4j, kafka.tools.StorageTool)
REPO = Path(__file__).resolve().parents[2]
# Fence a dead broker after 3 s instead of 9 s, so the fail-over test spends its time on Kafka, not on waiting.
FAST_FENCING = {"broker.heartbeat.interval.ms": 500, "broker.session.timeout.ms": 3000}


def three_nodes(tmp_path: Path) -> KafkaCluster:
    """Three KRaft nodes with the JIT's first tier alone, for tests that hold the host's lease around them: beside
    the suite's cells at idle priority (load ~20), a clean-clone run's three nodes lost every election for 90 s."""
    return KafkaCluster(NEWEST, 3, FAST_FENCING, tmp_path, jvm_opts=list(FIRST_TIER_ONLY))


@pytest.fixture(scope="session")
def fetched() -> Callable[[str], Path]:
    """Fetch (or verify) each release once per session, outside any test's cluster start."""
    return cache(kafka_classpath)


def round_trip(bootstrap: str, topic: str) -> None:
    """Produce one message with acks=all and read the same bytes back through a consumer group."""
    payload = uuid.uuid4().bytes
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, payload)
    assert producer.flush(30) == 0, "message not acknowledged"
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"t-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                assert msg.value() == payload
                return
        raise AssertionError(f"no message consumed from {topic} within 30 s")
    finally:
        consumer.close()


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


def test_single_broker_starts_round_trips_and_stops(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    fetched(NEWEST)
    with KafkaCluster(NEWEST, 1, {}, tmp_path) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        (node,) = endpoint.nodes
        assert endpoint.version == NEWEST
        assert endpoint.bootstrap_servers == f"127.0.0.1:{node.port}"
        assert "process.roles=broker,controller" in node.server_properties
        assert "offsets.topic.replication.factor=1" in node.server_properties
        assert "version" in node.jvm
        create_topic(endpoint.bootstrap_servers, "one", 1, 1, {"min.insync.replicas": 1})
        create_topic(endpoint.bootstrap_servers, "one", 1, 1)  # a resent request meets its own topic: accepted
        with pytest.raises(BrokerError, match="'one': it already exists with 1 partitions, not 2"):
            create_topic(endpoint.bootstrap_servers, "one", 2, 1)
        round_trip(endpoint.bootstrap_servers, "one")
        delete_topic(endpoint.bootstrap_servers, "one")
        pids = list(cluster.node_pids.values())
    assert_gone(pids)
    assert "Kafka Server started" in Path(node.log_path).read_text()  # the broker logs to its log file


def test_nodes_map_their_release_s_class_data_archive(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    """Made once (`make` does it first: then this finds it), the archive is mapped by every node as it starts
    (the kernel's map of the node's memory names the file) and recorded with the endpoint."""
    fetched(NEWEST)
    archive = make_archive(NEWEST)
    assert archive is not None and archive.is_file()
    with KafkaCluster(NEWEST, 1, {}, tmp_path) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None and endpoint.class_data == str(archive)
        (pid,) = cluster.node_pids.values()
        assert str(archive) in Path(f"/proc/{pid}/maps").read_text()


def test_three_brokers_elect_new_leaders_when_one_dies(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    fetched(NEWEST)
    with holding_the_host(tmp_path / "lease"), three_nodes(tmp_path) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        bootstrap = endpoint.bootstrap_servers
        assert len(set(endpoint.ports.values())) == 3
        assert "broker.session.timeout.ms=3000" in endpoint.nodes[0].server_properties  # passed through
        admin = AdminClient({"bootstrap.servers": bootstrap})  # held: a collected client fails its futures
        assert {n.id for n in admin.describe_cluster().result(timeout=10).nodes} == {1, 2, 3}

        create_topic(bootstrap, "ha", 3, 3, {"min.insync.replicas": 2})
        topic = admin.list_topics("ha", timeout=10).topics["ha"]
        assert all(len(p.isrs) == 3 and len(p.replicas) == 3 for p in topic.partitions.values())
        before = partition_leaders(bootstrap, "ha")
        assert set(before.values()) <= {1, 2, 3}

        victim = before[0]
        victim_pid = cluster.node_pids[victim]
        cluster.kill(victim)
        assert_gone([victim_pid])
        survivors = ",".join(f"127.0.0.1:{port}" for node_id, port in endpoint.ports.items() if node_id != victim)
        after = wait_for_leaders_without(survivors, "ha", victim, timeout_s=30)
        assert after != before
        assert all(after[p] != victim for p, leader in before.items() if leader == victim)

        producer = Producer({"bootstrap.servers": survivors, "acks": "all"})  # 2 in sync >= min.insync.replicas
        producer.produce("ha", b"after fail-over", partition=0)
        assert producer.flush(30) == 0
        pids = list(cluster.node_pids.values())
    assert_gone(pids)


def wait_for_leaders_without(bootstrap: str, topic: str, dead: int, timeout_s: float) -> dict[int, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        leaders = partition_leaders(bootstrap, topic)
        if all(leader not in (dead, -1) for leader in leaders.values()):
            return leaders
        assert time.monotonic() < deadline, f"leaders still {leaders} {timeout_s} s after node {dead} died"
        time.sleep(0.2)


def test_a_3_x_kraft_release_starts_and_round_trips(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    """The newest release is covered above; a 3.x release runs in KRaft mode the same way."""
    fetched(KRAFT_3)
    with KafkaCluster(KRAFT_3, 1, {}, tmp_path) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        assert endpoint.version == KRAFT_3 and endpoint.mode == "kraft"
        create_topic(endpoint.bootstrap_servers, "rt", 1, 1)
        round_trip(endpoint.bootstrap_servers, "rt")
        pids = list(cluster.node_pids.values())
    assert_gone(pids)


@pytest.mark.parametrize("version", [NEWEST, KRAFT_3])
def test_a_later_cluster_copies_the_formatted_storage_with_ids_of_its_own(
    tmp_path: Path, fetched: Callable[[str], Path], version: str
) -> None:
    """The storage tool's work is kept beside the release (bench_tasks.systems.kafka.formatted); a cluster started
    after it copies that, with its own cluster id and directory id, and serves as one the tool formatted."""
    fetched(version)
    kept = release_of(version).libs.parent / "formatted"
    with KafkaCluster(version, 1, {}, tmp_path / "first"):
        pass
    templates = list(kept.glob("*/node-1/meta.properties"))
    assert templates, f"nothing kept in {kept}"
    with KafkaCluster(version, 1, {}, tmp_path / "second") as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        meta = (tmp_path / "second" / "node-1" / "data" / "meta.properties").read_text()
        assert f"cluster.id={endpoint.cluster_id}\n" in meta
        directory = re.search(r"^directory\.id=(.+)$", meta, re.M)
        assert directory is None or all(directory.group(0) not in t.read_text() for t in templates)
        create_topic(endpoint.bootstrap_servers, "copied", 1, 1)
        round_trip(endpoint.bootstrap_servers, "copied")


def test_every_release_on_maven_central_from_2_4_is_listed() -> None:
    listed = {r.version: r for r in list_releases()}  # asks Central now
    assert OLDEST in listed and NEWEST in listed and KRAFT_3 in listed
    assert min(listed, key=lambda v: tuple(map(int, v.split(".")[:3]))) == OLDEST
    assert listed[NEWEST].missing is None
    for release in listed.values():  # what cannot be assembled names the module, as group:artifact:version
        assert release.missing is None or release.missing.startswith("org.apache.kafka:"), release


def test_tampered_missing_or_extra_jar_is_refused_and_refetch_repairs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fetched: Callable[[str], Path]
) -> None:
    shared = fetched(NEWEST).parent
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))  # tamper with a copy, never the shared cache
    home = tmp_path / "cache" / "kafka" / NEWEST
    shutil.copytree(shared, home)
    libs = kafka_classpath(NEWEST)
    assert libs == home / "libs"

    clients = libs / f"kafka-clients-{NEWEST}.jar"
    with open(clients, "r+b") as jar:
        jar.seek(1000)
        jar.write(b"\0tampered\0")
    with pytest.raises(BrokerError, match=rf"sha256 mismatch kafka-clients-{NEWEST}\.jar"):
        kafka_classpath(NEWEST)
    with pytest.raises(BrokerError, match=rf"sha256 mismatch kafka-clients-{NEWEST}\.jar"):
        KafkaCluster(NEWEST, 1, {}, tmp_path / "run").start()  # refused before any JVM starts

    (libs / f"kafka_2.13-{NEWEST}.jar").unlink()
    (libs / "extra.jar").write_bytes(b"PK")
    with pytest.raises(BrokerError, match=rf"missing kafka_2\.13-{NEWEST}\.jar; unexpected extra\.jar"):
        kafka_classpath(NEWEST)

    assert kafka_classpath(NEWEST, refetch=True) == libs
    assert kafka_classpath(NEWEST) == libs
    assert not (libs / "extra.jar").exists()
    assert sorted(p.name for p in home.parent.iterdir()) == [NEWEST]  # no temp or replaced folder left


def test_a_node_that_cannot_start_fails_the_start_with_its_log(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    fetched(NEWEST)
    bad_config = KafkaCluster(NEWEST, 1, {"num.network.threads": "many"}, tmp_path)
    with pytest.raises(BrokerError, match=r"(?s)formatting Kafka node 1 .*num\.network\.threads"):
        bad_config.start()  # the storage tool reads server.properties first, and says what is wrong
    bad_jvm = KafkaCluster(NEWEST, 1, {}, tmp_path, jvm_opts=["-XX:+NoSuchFlag"])
    with pytest.raises(BrokerError, match=r"(?s)node 1 exited with code 1 during start.*NoSuchFlag"):
        bad_jvm.start()


_DETACHED_UP = """
import json, sys
from pathlib import Path
from bench_tasks.systems.kafka.cluster import KafkaCluster
cluster = KafkaCluster(sys.argv[1], 1, {}, Path(sys.argv[2]), tie_to_parent=False)
cluster.start()
print(json.dumps(cluster.state()))
"""


def test_detached_cluster_outlives_its_starter_and_stops_by_pid(tmp_path: Path, fetched: Callable[[str], Path]) -> None:
    fetched(NEWEST)
    up = subprocess.run(
        [sys.executable, "-c", _DETACHED_UP, NEWEST, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    state = json.loads(up.stdout.splitlines()[-1]) if up.returncode == 0 else None
    assert state is not None, up.stderr[-2000:]
    pids = [node["pid"] for node in state["nodes"]]
    try:
        assert all(psutil.pid_exists(pid) for pid in pids), "the JVM died with the process that started it"
        assert all(os.getsid(pid) == pid for pid in pids)  # own session: a terminal's SIGHUP does not reach it
        admin = AdminClient({"bootstrap.servers": state["bootstrap_servers"]})
        assert [n.id for n in admin.describe_cluster().result(timeout=10).nodes] == [1]
        assert stop_detached(state) == pids
    finally:
        stop_detached(state)  # idempotent: a PID that is gone is skipped
    assert_gone(pids)
    assert stop_detached(state) == []


def test_the_active_controller_is_read_from_the_nodes_quorum_state(
    tmp_path: Path, fetched: Callable[[str], Path]
) -> None:
    """A fault's `controller` target: the node the quorum-state files name is the one whose own log says it
    became the KRaft leader; killed, another node takes over and the files say so within seconds."""
    fetched(NEWEST)
    with holding_the_host(tmp_path / "lease"), three_nodes(tmp_path) as cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        files = [quorum_state_file(node.log_dir) for node in endpoint.nodes]
        first = _wait_for_controller(files, other_than=None)
        assert _logged_leadership(endpoint, first), "the named controller never logged becoming the KRaft leader"
        cluster.kill(first)
        second = _wait_for_controller(files, other_than=first)
        assert second in {1, 2, 3} - {first}
        assert _logged_leadership(endpoint, second)


def _wait_for_controller(files: list[Path], other_than: int | None, timeout_s: float = 30) -> int:
    deadline = time.monotonic() + timeout_s
    while (found := active_controller(files)) in (None, other_than):
        assert time.monotonic() < deadline, f"no controller other than {other_than} after {timeout_s} s"
        time.sleep(0.1)
    assert found is not None
    return found


def _logged_leadership(endpoint: Any, node_id: int, timeout_s: float = 10) -> bool:
    """Kafka 4's raft manager logs `Completed transition to Leader(localVoterNode=...ReplicaKey(id=N`.

    The node writes its quorum-state file before it logs the completed transition, so on a loaded host the file
    can name the new leader a moment before the line is in the log: poll for it rather than read once."""
    (node,) = [n for n in endpoint.nodes if n.node_id == node_id]
    pattern = re.compile(rf"Completed transition to Leader\(.*?ReplicaKey\(id={node_id},")
    deadline = time.monotonic() + timeout_s
    while not pattern.search(Path(node.log_path).read_text()):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True
