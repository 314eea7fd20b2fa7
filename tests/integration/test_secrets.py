"""Secrets on real brokers: what the cell records, what lands on disk and what the process table shows.

Each test starts real brokers on loopback and looks where a secret could leak: the recorded context, files
(their mode and folder), process arguments, and the JAAS lines a password with quotes must survive."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.kafka.probe import reported_version
from bench_tasks.systems.kafka.security import ListenerSecurity
from bench_tasks.systems.kafka.settings import KAFKA_VERSIONS
from bench_tasks.systems.nats.release import bundled_version
from bench_tasks.systems.nats.server import NatsServer
from bench_tasks.systems.nats.settings import NatsBroker

pytestmark = pytest.mark.usefixtures("no_orphans")
NEWEST = KAFKA_VERSIONS[0]
AWKWARD = 'pa"ss\\wo rd'  # a quote, a backslash and a space: what breaks a hand-quoted JAAS line


def test_nats_passthrough_secrets_are_not_recorded(tmp_path: Path) -> None:
    """A matrix may pass nats-server an authorization block; the server gets it, the record does not."""
    broker = NatsBroker(server={"authorization": {"user": "u", "password": "hunter2"}, "max_payload": 2097152})
    with NatsServer(bundled_version(), broker, tmp_path / "nats") as server:
        assert server.endpoint is not None
        recorded = server.endpoint.config
    assert "hunter2" not in recorded and "<redacted>" in recorded and "2097152" in recorded
    assert "hunter2" in (tmp_path / "nats" / "nats-server.conf").read_text()  # what the server runs with


@pytest.mark.timeout(400)
def test_a_sasl_password_with_quotes_survives_the_jaas_lines(tmp_path: Path) -> None:
    """PLAIN users live in the broker's JAAS line and the Java tools log in with one: a password holding a quote
    and a backslash must reach both intact (librdkafka, which needs no JAAS, logs in with it too)."""
    cluster = KafkaCluster(NEWEST, 1, {}, tmp_path / "kafka", security="sasl_plaintext", sasl_mechanism="PLAIN")
    cluster.security = ListenerSecurity("SASL_PLAINTEXT", "PLAIN", client_password=AWKWARD)
    with cluster:  # start() waits for librdkafka to log in as the client user: the broker parsed the password
        assert cluster.endpoint is not None
        client = cluster.client_config
        assert client["sasl.password"] == AWKWARD
        reported = reported_version(cluster.endpoint.bootstrap_servers, client, timeout_s=120)  # the Java client
        properties = json.dumps([n.server_properties for n in cluster.endpoint.nodes])
    assert reported["version"] == ".".join(NEWEST.split(".")[:2])
    assert AWKWARD not in properties and "<redacted>" in properties
