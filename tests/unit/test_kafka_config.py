"""The Kafka system without a broker: server.properties, cluster ids, release lists, Maven errors."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from bench_tasks.brokers.maven import mvn_reason
from bench_tasks.brokers.ports import free_ports
from bench_tasks.errors import BrokerError
from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.kafka.jvm import default_jvm_opts
from bench_tasks.systems.kafka.properties import render_properties
from bench_tasks.systems.kafka.release import available_versions
from bench_tasks.systems.kafka.tools import new_cluster_id


def test_render_properties_writes_values_as_kafka_parses_them() -> None:
    text = render_properties({"a.b": True, "c": False, "n": 3, "list": ["x", 1], "path": "C:\\tmp", "s": " pad"})
    assert text == "a.b=true\nc=false\nn=3\nlist=x,1\npath=C:\\\\tmp\ns=\\ pad\n"


def test_render_properties_escapes_separators_in_keys_and_line_breaks_in_values() -> None:
    assert render_properties({"odd key=x": "two\nlines"}) == "odd\\ key\\=x=two\\nlines\n"


def settings(cluster: KafkaCluster) -> dict[str, object]:
    return cluster.settings(1, 9092, 9093, Path("/data"), "1@127.0.0.1:9093,2@127.0.0.1:2,3@127.0.0.1:3")


def test_internal_topics_fit_the_cluster_and_server_overrides_win() -> None:
    one = settings(KafkaCluster("4.3.1", 1, None, "w"))
    assert one["offsets.topic.replication.factor"] == 1
    assert one["transaction.state.log.min.isr"] == 1
    assert one["offsets.topic.num.partitions"] == 1  # one node coordinates every group anyway; joins at once
    three = settings(KafkaCluster("4.3.1", 3, {"group.initial.rebalance.delay.ms": 3000, "x.y": "z"}, "w"))
    assert three["offsets.topic.replication.factor"] == 3
    assert three["transaction.state.log.min.isr"] == 2
    assert "offsets.topic.num.partitions" not in three  # Kafka's 50 spread the groups' coordinators over nodes
    assert three["group.initial.rebalance.delay.ms"] == 3000  # overridden in place
    assert three["x.y"] == "z"  # unknown to the harness, passed through
    assert three["auto.create.topics.enable"] is False
    assert three["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert three["process.roles"] == "broker,controller"


def test_share_group_topic_settings_only_for_releases_that_have_share_groups() -> None:
    assert "share.coordinator.state.topic.replication.factor" in settings(KafkaCluster("4.0.0", 1, None, "w"))
    assert "share.coordinator.state.topic.replication.factor" not in settings(KafkaCluster("3.9.2", 1, None, "w"))


def test_cluster_needs_a_broker() -> None:
    with pytest.raises(BrokerError, match="at least one broker"):
        KafkaCluster("4.3.1", 0, None, "w")


def test_cluster_ids_are_kafka_uuids_that_no_parser_takes_for_an_option() -> None:
    ids = {new_cluster_id() for _ in range(500)}
    assert len(ids) == 500
    for text in ids:
        assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", text)
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_free_ports_are_distinct() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6


def test_heap_follows_kafka_heap_opts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_HEAP_OPTS", raising=False)
    assert default_jvm_opts()[:2] == ("-Xms1g", "-Xmx1g")
    monkeypatch.setenv("KAFKA_HEAP_OPTS", "-Xms256m -Xmx512m")
    opts = default_jvm_opts()
    assert opts[:2] == ("-Xms256m", "-Xmx512m") and "-Xmx1g" not in opts and "-XX:+UseG1GC" in opts


def test_gc_and_compiler_flags_follow_kafka_jvm_performance_opts(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-run-class.sh's variable replaces the GC flags as a whole; the heap stays."""
    monkeypatch.delenv("KAFKA_HEAP_OPTS", raising=False)
    monkeypatch.delenv("KAFKA_JVM_PERFORMANCE_OPTS", raising=False)
    assert "-XX:+UseG1GC" in default_jvm_opts()
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseParallelGC -XX:TieredStopAtLevel=1")
    assert default_jvm_opts() == ("-Xms1g", "-Xmx1g", "-XX:+UseParallelGC", "-XX:TieredStopAtLevel=1")


def test_available_versions_reads_the_cached_metadata_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path))
    cached = tmp_path / "kafka" / "maven-metadata.xml"
    cached.parent.mkdir()
    versions = "".join(f"<version>{v}</version>" for v in ("3.9.0", "4.0.0", "3.10.1", "4.1.0", "3.9.2"))
    cached.write_text(f"<metadata><versioning><versions>{versions}</versions></versioning></metadata>")
    assert available_versions() == ["4.1.0", "4.0.0", "3.10.1", "3.9.2", "3.9.0"]


def test_maven_failure_names_the_missing_artifact() -> None:
    output = (
        "\x1b[1;31m[ERROR]\x1b[m Failed to execute goal on project kafka-runtime: Could not resolve dependencies "
        "for project sixnines:kafka-runtime:pom:0: Could not find artifact "
        "org.apache.kafka:kafka-tools-api:jar:4.4.0 in central (https://repo.maven.apache.org/maven2) -> [Help 1]\n"
    )
    assert mvn_reason(output) == "artifact org.apache.kafka:kafka-tools-api:jar:4.4.0 is not on Maven Central"


@pytest.mark.parametrize(
    ("keys", "expect"),
    [
        ("none", [(None, None)] * 3),
        ("round_robin", [(None, 0), (None, 2), (None, 3)]),  # (seq + logical producer) % partitions
        ("per_producer", [(b"p-0", None), (b"p-1", None), (b"p-0", None)]),
    ],
)
def test_keys_follow_the_logical_producer(keys: str, expect: list) -> None:
    """Background producers multiplexed on one client still get one key each (seed 004's keyed TRAFFIC)."""
    from bench_tasks.systems.kafka.driver import KafkaDriver
    from bench_tasks.systems.kafka.settings import KafkaClient

    cell = type("Spec", (), {"client": KafkaClient(keys=keys)})()
    driver = KafkaDriver("127.0.0.1:9", cell, "c")
    driver._partitions = 4
    key_for = driver._key_function("p")
    assert [key_for(seq, stream) for seq, stream in ((0, 0), (1, 1), (3, 0))] == expect


def test_a_cluster_on_a_namespace_address_binds_advertises_and_certifies_it(tmp_path: Path) -> None:
    """Kafka in a network-namespace host: every listener on that address, and with TLS the certificate names it
    (clients in other namespaces verify the host name they connect to)."""
    import ipaddress

    from cryptography import x509

    cluster = KafkaCluster("4.3.1", 3, None, tmp_path, host="10.99.0.2", security="ssl")
    values = cluster.settings(2, 9092, 9093, Path("/data"), "2@10.99.0.2:9093")
    assert values["listeners"] == "CLIENT://10.99.0.2:9092,CONTROLLER://10.99.0.2:9093"
    assert values["advertised.listeners"] == "CLIENT://10.99.0.2:9092"
    cluster.security.prepare(tmp_path, cluster.host)
    cert = x509.load_pem_x509_certificate((tmp_path / "tls" / "server-cert.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.99.0.2") in names.get_values_for_type(x509.IPAddress)
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    plain = KafkaCluster("4.3.1", 1, None, tmp_path, host="10.99.0.2").settings(1, 1, 2, Path("/d"), "1@10.99.0.2:2")
    assert plain["listeners"] == "PLAINTEXT://10.99.0.2:1,CONTROLLER://10.99.0.2:2"
    assert plain["advertised.listeners"] == "PLAINTEXT://10.99.0.2:1"


def test_nodes_on_hosts_of_their_own_bind_advertise_and_vote_on_their_own_addresses(tmp_path: Path) -> None:
    """One host per node (`sites`): each node's listeners on its own address, the quorum voters on each node's, and
    with TLS the one shared certificate names every node's address."""
    import ipaddress

    from cryptography import x509

    sites = {n: (f"sixnines-t0-b{n}", f"10.99.0.{n + 1}") for n in (1, 2, 3)}
    cluster = KafkaCluster("4.3.1", 3, None, tmp_path, host="10.99.0.1", sites=sites)
    voters = "1@10.99.0.2:9093,2@10.99.0.3:9093,3@10.99.0.4:9093"
    values = cluster.settings(3, 9092, 9093, Path("/data"), voters)
    assert values["listeners"] == "PLAINTEXT://10.99.0.4:9092,CONTROLLER://10.99.0.4:9093"
    assert values["advertised.listeners"] == "PLAINTEXT://10.99.0.4:9092"
    assert values["controller.quorum.voters"] == voters
    tls = KafkaCluster("4.3.1", 3, None, tmp_path, host="10.99.0.1", sites=sites, security="ssl")
    assert tls.settings(2, 1, 2, Path("/d"), voters)["advertised.listeners"] == "CLIENT://10.99.0.3:1"
    tls.security.prepare(tmp_path, *(address for _, address in sites.values()))
    cert = x509.load_pem_x509_certificate((tmp_path / "tls" / "server-cert.pem").read_bytes())
    named = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {ipaddress.ip_address(a) for _, a in sites.values()} <= set(named.get_values_for_type(x509.IPAddress))
    with pytest.raises(BrokerError, match=r"nodes are 1..3; sites were given for \[1, 2\]"):
        KafkaCluster("4.3.1", 3, None, tmp_path, sites={1: sites[1], 2: sites[2]})


def test_the_leader_poll_leaves_a_silent_node_out_of_its_bootstrap() -> None:
    """A node cut off or frozen is not asked who leads: a metadata request to it would wait on silence."""
    from bench_tasks.systems.kafka.provision import _bootstrap_without

    listeners = {1: "10.99.0.2:9092", 2: "10.99.0.3:9092", 3: "10.99.0.4:9092"}
    everyone = ",".join(listeners.values())
    assert _bootstrap_without(everyone, listeners, None) == everyone
    assert _bootstrap_without(everyone, listeners, 2) == "10.99.0.2:9092,10.99.0.4:9092"
    assert _bootstrap_without(everyone, {}, 2) == everyone  # a reference without listeners: as before


def test_backlog_counts_only_the_partitions_the_consumer_is_fetching() -> None:
    """librdkafka's statistics list every partition the handle knows: one lost in a rebalance (not desired,
    stopped) and the internal -1 can keep a stale fetch-queue count that no one will take; an idle group member
    (more consumers than partitions) must not look backed up at 0 msg/s."""
    from bench_tasks.systems.kafka.driver import _Statistics

    def partition(pid: int, count: int, desired: bool, state: str) -> dict:
        return {"partition": pid, "fetchq_cnt": count, "desired": desired, "fetch_state": state}

    stats = _Statistics()
    fetching = {"0": partition(0, 7, True, "active"), "-1": partition(-1, 3, False, "none")}
    stats.update(json.dumps({"type": "consumer", "topics": {"t": {"partitions": fetching}}}))
    assert stats.backlog() == 7
    lost = {"0": partition(0, 1, False, "stopped"), "1": partition(1, 2, True, "active")}
    stats.update(json.dumps({"type": "consumer", "topics": {"t": {"partitions": lost}}}))
    assert stats.backlog() == 2
    stats.update(json.dumps({"type": "consumer", "topics": {}}))
    assert stats.backlog() == 0
