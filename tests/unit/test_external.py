"""External brokers and Kafka security axes without brokers: validation, connection parsing, client settings,
route names, and the pieces of a secured KRaft listener."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench_tasks.brokers.connections import BrokerConnection, get_connection, parse_connection
from bench_tasks.brokers.external import refuse_faults, route_names
from bench_tasks.cell.lifecycle import prepare_cell
from bench_tasks.errors import BrokerError
from bench_tasks.secrecy import redacted
from bench_tasks.spec.matrix import load_matrix, parse_matrix
from bench_tasks.systems.kafka.access import group_of, kafka_access
from bench_tasks.systems.kafka.probe import java_client_properties, parse_features
from bench_tasks.systems.kafka.security import ListenerSecurity
from bench_tasks.systems.nats.access import nats_access
from tests.unit.matrices import problems

REPO = Path(__file__).resolve().parents[2]


def raw(system: str = "kafka", **block: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "systems": [{"system": system, **block}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "measure_s": 1},
        "measurements": ["e2e"],
    }


# --- validation ---------------------------------------------------------------------------------------------


def test_external_cell_has_connection_and_version_external_and_its_own_id() -> None:
    (ext,) = parse_matrix(raw(brokers="external", connection="sixnines_kafka_external"), "m.yaml").cells
    (own,) = parse_matrix(raw(versions=["4.3.1"]), "m.yaml").cells
    assert ext.spec.brokers == "external" and ext.spec.connection == "sixnines_kafka_external"
    assert ext.spec.version == "external" and own.spec.brokers == "provisioned" and own.spec.connection is None
    assert ext.id != own.id and ext.series_key != own.series_key
    assert "ext:sixnines_kafka_external" in ext.label


def test_external_without_connection_names_the_field() -> None:
    assert problems(raw(brokers="external")) == [
        "systems[0].connection: required when brokers is 'external' (an Airflow connection id)"
    ]


def test_connection_without_external_is_refused() -> None:
    assert problems(raw(versions=["4.3.1"], connection="x")) == [
        "systems[0].connection: 'x' — only for brokers 'external'"
    ]


def test_external_versions_are_reported_not_chosen() -> None:
    (line,) = problems(raw(brokers="external", connection="c", versions=["4.3.1"]))
    assert line.startswith("systems[0].versions: ['4.3.1'] — external brokers report their own version")


def test_provisioned_block_still_needs_versions() -> None:
    assert problems(raw()) == ["systems[0].versions: Field required"]


def test_external_refuses_server_config_and_broker_cpus() -> None:
    (line,) = problems(raw(brokers="external", connection="c", broker={"server": {"num.io.threads": 4}}))
    assert "broker.server: external brokers keep their own server config" in line
    data = raw(brokers="external", connection="c")
    data["workload"]["cpus"] = {"broker": [0]}
    (line,) = problems(data)
    assert "workload.cpus.broker: external brokers run elsewhere" in line


def test_bad_connection_id_and_bad_brokers_value_name_their_fields() -> None:
    (line,) = problems(raw(brokers="external", connection="no spaces"))
    assert line.startswith("systems[0].connection: 'no spaces'")
    (line,) = problems(raw(brokers="elsewhere", connection="c"))
    assert line.startswith("systems[0].brokers: 'elsewhere'")


def test_security_axis_values_are_checked_and_sasl_mechanism_needs_sasl() -> None:
    data = raw(versions=["4.3.1"], axes={"client.security": ["ssl", "tls"]})
    (line,) = problems(data)
    assert line.startswith("axes.client.security[1]: 'tls'")
    (line,) = problems(raw(versions=["4.3.1"], client={"security": "ssl", "sasl_mechanism": "PLAIN"}))
    assert "client.sasl_mechanism 'PLAIN' needs client.security sasl_plaintext or sasl_ssl" in line
    cells = parse_matrix(raw(versions=["4.3.1"], axes={"client.security": ["plaintext", "sasl_ssl"]}), "m").cells
    assert [c.spec.client.security for c in cells] == ["plaintext", "sasl_ssl"]
    assert "sasl_ssl" in cells[1].label and cells[0].id != cells[1].id


def test_faults_are_refused_for_external_cells() -> None:
    (cell,) = parse_matrix(raw(brokers="external", connection="k"), "m.yaml").cells
    refuse_faults(cell, [])  # no faults: fine
    with pytest.raises(BrokerError, match=r"faults .* need provisioned brokers.*connection 'k'"):
        refuse_faults(cell, [{"kind": "kill", "at_s": 1}])


def test_run_params_do_not_override_an_external_version() -> None:
    (cell,) = parse_matrix(raw(brokers="external", connection="k"), "m.yaml").cells
    assert prepare_cell(cell, {"kafka": "3.9.2"}).spec.version == "external"


def test_shipped_external_matrix_parses_without_its_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL", raising=False)
    cells = load_matrix(REPO / "matrices" / "external.yaml").cells
    assert {c.spec.connection for c in cells} == {"sixnines_kafka_external", "sixnines_nats_external"}
    assert {c.spec.client.security for c in cells if c.spec.system == "kafka"} == {"plaintext", "ssl", "sasl_ssl"}
    assert all(c.spec.brokers == "external" for c in cells)
    # nothing secret or address-like is part of a spec
    assert not any(k in json.dumps([c.spec.model_dump() for c in cells]) for k in ("password", "bootstrap", "://"))


# --- connections -----------------------------------------------------------------------------------------------


def test_uri_and_json_forms_agree_with_airflow() -> None:
    from airflow.sdk import Connection

    uri = "kafka://us%40er:p%3Ass@broker-1:9094/?security_protocol=SASL_SSL&sasl_mechanism=SCRAM-SHA-512"
    ours = parse_connection("k", uri)
    theirs = Connection.from_uri(uri, conn_id="k")
    assert (ours.conn_type, ours.host, ours.port, ours.login, ours.password, ours.extra) == (
        theirs.conn_type,
        theirs.host,
        theirs.port,
        theirs.login,
        theirs.password,
        theirs.extra_dejson,
    )
    assert parse_connection("k", ours.to_json()) == ours
    nested = parse_connection("k", 'nats://h:1/?__extra__={"servers": ["nats://a:1", "nats://b:2"]}')
    assert nested.extra == {"servers": ["nats://a:1", "nats://b:2"]}
    assert "p:ss" not in repr(ours)  # the password never shows in a repr


def test_get_connection_reads_the_env_var_and_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_KAFKA", json.dumps({"conn_type": "kafka", "host": "h", "port": 9092}))
    assert get_connection("my_kafka").host == "h"
    monkeypatch.setenv("AIRFLOW_CONN_BROKEN", "{not json")
    with pytest.raises(BrokerError, match=r"connection 'broken' .AIRFLOW_CONN_BROKEN.: not a valid Airflow URI"):
        get_connection("broken")


def test_kafka_access_maps_fields_and_the_cell_security_wins() -> None:
    conn = BrokerConnection(
        "k",
        "kafka",
        "h1",
        9093,
        "alice",
        "secret",
        extra={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "ssl_ca_location": "/ca.pem",
            "listeners": {"plaintext": "h1:9092,h2:9092", "ssl": ["h1:9095"]},
        },
    )
    access = kafka_access(conn)
    assert access.address == "h1:9093"  # no listener for SASL_SSL: host and port
    assert access.client == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice",
        "sasl.password": "secret",
        "ssl.ca.location": "/ca.pem",
    }
    assert "secret" not in json.dumps(access.described) and access.described["sasl_username"] == "alice"
    plain = kafka_access(conn, security="plaintext")
    assert plain.address == "h1:9092,h2:9092" and plain.client == {"security.protocol": "PLAINTEXT"}
    assert kafka_access(conn, security="ssl").address == "h1:9095"
    with pytest.raises(BrokerError, match="login and password are required for security protocol SASL_SSL"):
        kafka_access(BrokerConnection("k", host="h"), security="sasl_ssl")
    with pytest.raises(BrokerError, match=r"extra\.security_protocol 'TLS'"):
        kafka_access(BrokerConnection("k", host="h", extra={"security_protocol": "tls"}))


def test_nats_access_maps_user_token_and_tls() -> None:
    user = nats_access(BrokerConnection("n", "nats", "h", 4223, "bob", "pw", extra={"tls_ca_file": "/ca.pem"}))
    assert user.address == "tls://h:4223"
    assert user.client == {"user": "bob", "password": "pw", "tls_ca_file": "/ca.pem"}
    assert "pw" not in json.dumps(user.described)
    token = nats_access(BrokerConnection("n", "nats", "h", extra={"token": "t0k"}))
    assert token.address == "nats://h:4222" and token.client == {"token": "t0k"}
    with pytest.raises(BrokerError, match="no host"):
        nats_access(BrokerConnection("n"))


def test_route_names_are_unique_per_run_and_valid_everywhere() -> None:
    a, b = route_names("0123456789ab", "run-1"), route_names("0123456789ab", "run-2")
    assert a != b and a.startswith("0123456789ab-") and a == route_names("0123456789ab", "run-1")
    assert all(ch.isalnum() or ch == "-" for ch in a)  # Kafka topics, NATS subjects and stream names accept it


# --- the secured listener of a provisioned cluster -------------------------------------------------------------------


def test_sasl_ssl_scram_listener_settings_and_client_config(tmp_path: Path) -> None:
    sec = ListenerSecurity.of("sasl_ssl", "SCRAM-SHA-512")
    settings = sec.server_settings(9092, 9093, tmp_path)
    assert settings["listener.security.protocol.map"] == "CLIENT:SASL_SSL,CONTROLLER:PLAINTEXT"
    assert settings["inter.broker.listener.name"] == "CLIENT" and settings["ssl.keystore.type"] == "PEM"
    assert settings["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert sec.client_password in " ".join(sec.format_args())  # SCRAM users go into the metadata at format time
    assert sec.format_args()[0] == "--add-scram" and len(sec.format_args()) == 4
    client = sec.client_config(tmp_path)
    assert client["security.protocol"] == "SASL_SSL" and client["sasl.username"] == "sixnines"
    assert client["ssl.ca.location"] == str(tmp_path / "tls" / "ca.pem")
    recorded = json.dumps(redacted(settings)) + json.dumps(sec.describe())
    assert sec.admin_password not in recorded and sec.client_password not in recorded
    assert ListenerSecurity.of(None, None).server_settings(1, 2, tmp_path) == {}
    plain = ListenerSecurity.of("sasl_plaintext", None)
    assert plain.mechanism == "PLAIN" and plain.format_args() == []
    assert (
        f'user_sixnines="{plain.client_password}"'
        in plain.server_settings(1, 2, tmp_path)["listener.name.client.plain.sasl.jaas.config"]
    )


def test_java_client_properties_and_feature_lines() -> None:
    props = java_client_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.location": "/ca.pem",
        }
    )
    assert props["sasl.jaas.config"].endswith('required username="u" password="p";')
    assert props["ssl.truststore.type"] == "PEM" and props["ssl.truststore.location"] == "/ca.pem"
    text = (
        "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: 5\n"
        "Feature: metadata.version\tSupportedMinVersion: 3.0-IV1\tSupportedMaxVersion: 3.9-IV0\t"
        "FinalizedVersionLevel: 3.9-IV0\tEpoch: 5\n"
    )
    features = parse_features(text)
    assert features["metadata.version"]["SupportedMaxVersion"] == "3.9-IV0" and set(features) == {
        "kraft.version",
        "metadata.version",
    }


def test_the_consumer_groups_a_cell_leaves_on_external_kafka_are_its_own() -> None:
    """Deleted after a cell on running brokers: its topics' groups, `-lagging`, a background's `-s1`, `-s2`, …;
    never another cell's, nor a group merely starting with a topic's name."""
    topics = ["sixnines-c1-measured", "sixnines-c1-bg_others"]
    for group in (*topics, "sixnines-c1-measured-lagging", "sixnines-c1-bg_others-s1", "sixnines-c1-bg_others-s12"):
        assert group_of(group, topics), group
    for group in ("sixnines-c2-measured", "sixnines-c1-bg_others-sx", "sixnines-c1-bg_others-s", "app-group"):
        assert not group_of(group, topics), group
