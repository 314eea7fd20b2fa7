"""NATS Streaming's models, its `System` entry and the server config it renders: tiny literal inputs, known answers,
and errors that name the bad field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from bench_tasks.systems.stan import STAN
from bench_tasks.systems.stan.provision import cluster_id_for, largest_message
from bench_tasks.systems.stan.server import StanServer, max_payload_for, render_config
from bench_tasks.systems.stan.settings import StanBroker, StanCell, StanClient
from tests.recorded_releases import recorded

WORKLOAD = {"message_size_bytes": 256, "rate_per_s": 50, "measure_s": 30}


def cell(**overrides: Any) -> StanCell:
    raw = {"system": "stan", "version": "latest", "workload": WORKLOAD, "measurement": "e2e", **overrides}
    return StanCell.model_validate(raw)


def error_of(make: Any) -> str:
    with pytest.raises(ValidationError) as info:
        make()
    return str(info.value)


# -- broker ---------------------------------------------------------------------------------------------------------
def test_the_file_store_records_its_sync_policy_and_the_memory_store_has_none() -> None:
    assert StanBroker(store="file").file_sync is True  # the server's default, written out
    assert StanBroker(store="file", file_sync=False).file_sync is False
    assert StanBroker().file_sync is None
    assert StanBroker(store="file") == StanBroker(store="file", file_sync=True)  # one server, one cell


def test_file_sync_needs_the_file_store() -> None:
    message = error_of(lambda: StanBroker(file_sync=False))
    assert "file_sync: needs store 'file'" in message


@pytest.mark.parametrize(
    ("streaming", "named"),
    [
        ({"store": "file"}, "streaming.store: set by the harness; use broker.store"),
        ({"cluster_id": "x"}, "streaming.cluster_id: set by the harness; use broker.cluster_id"),
        ({"store_limits": {"max_msgs": 1}}, "streaming.store_limits: set by the harness; use broker.limits"),
        ({"file_options": {"sync_on_flush": False}}, "streaming.file_options.sync_on_flush: use broker.file_sync"),
    ],
)
def test_what_the_model_owns_cannot_pass_through(streaming: dict[str, Any], named: str) -> None:
    assert named in error_of(lambda: StanBroker(store="file", streaming=streaming))


def test_the_listen_address_is_the_harness_s() -> None:
    assert "server.listen: the harness chooses" in error_of(lambda: StanBroker(server={"listen": "0.0.0.0:4222"}))


def test_a_bad_limit_is_named() -> None:
    message = error_of(lambda: StanBroker(limits={"max_age": "ten minutes"}))
    assert "limits.max_age" in message
    assert "max_msgs" in error_of(lambda: StanBroker(limits={"max_msgs": -1}))
    assert "mystery" in error_of(lambda: StanBroker(limits={"mystery": 1}))


# -- client ---------------------------------------------------------------------------------------------------------
def test_a_start_position_asks_for_its_argument() -> None:
    assert "start_sequence: required when start_position is 'sequence'" in error_of(
        lambda: StanClient(start_position="sequence")
    )
    assert "start_time_delta_s: applies to start_position 'time_delta' only" in error_of(
        lambda: StanClient(start_time_delta_s=5)
    )
    assert StanClient(start_position="sequence", start_sequence=7).start_sequence == 7


def test_client_defaults_are_the_go_client_s() -> None:
    c = StanClient()
    assert (c.ack_wait_s, c.max_in_flight, c.max_pub_acks_in_flight, c.durable) == (30, 1024, 16384, False)


# -- cell -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("measurement", ["e2e", "publish"])
def test_e2e_and_publish_cells_validate(measurement: str) -> None:
    assert cell(measurement=measurement).measurement == measurement


@pytest.mark.parametrize("measurement", ["rtt", "chain"])
def test_other_measurements_are_refused_with_the_ones_that_fit(measurement: str) -> None:
    message = error_of(lambda: cell(measurement=measurement))
    assert f"measurement {measurement!r}: NATS Streaming cells measure 'e2e' or 'publish'" in message


def test_an_unknown_version_says_where_the_releases_are_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(monkeypatch, tmp_path, "stan", ["0.25.6", "0.22.1"])
    message = error_of(lambda: cell(version="0.3.1"))
    assert "unknown stan version '0.3.1'; not in the release list" in message and "fetch stan --list" in message


def test_an_external_server_needs_its_cluster_id_and_keeps_its_store() -> None:
    external = {"brokers": "external", "connection": "stan_prod", "version": "external"}
    assert "broker.cluster_id: required" in error_of(lambda: cell(**external))
    message = error_of(lambda: cell(**external, broker={"cluster_id": "prod", "store": "file"}))
    assert "broker.store: an external server keeps its own" in message
    assert cell(**external, broker={"cluster_id": "prod"}).broker.cluster_id == "prod"


def test_prefill_is_refused_for_now() -> None:
    message = error_of(lambda: cell(workload={**WORKLOAD, "prefill_messages": 10}))
    assert "prefill_messages and lagging_consumers are not supported for NATS Streaming" in message


# -- the system -------------------------------------------------------------------------------------------------
def test_versions_are_newest_first_and_latest_is_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded(monkeypatch, tmp_path, "stan", ["0.22.1", "0.25.6", "0.24.1"])
    assert STAN.versions == ("0.25.6", "0.24.1", "0.22.1")
    assert STAN.resolve_version("latest") == "0.25.6"
    assert STAN.resolve_version("0.24.1") == "0.24.1"


@pytest.mark.parametrize(
    ("broker", "client", "label", "tag"),
    [
        ({}, {}, "stan/memory", "memory"),
        ({"store": "file"}, {}, "stan/file sync", "file_sync"),
        ({"store": "file", "file_sync": False}, {"durable": True}, "stan/file nosync durable", "file_nosync"),
    ],
)
def test_labels_and_group_tags_tell_the_three_servers_apart(
    broker: dict[str, Any], client: dict[str, Any], label: str, tag: str
) -> None:
    spec = cell(broker=broker, client=client)
    assert (STAN.label(spec), STAN.group_tag(spec)) == (label, tag)


def test_every_publish_is_acknowledged_and_nothing_leads() -> None:
    assert STAN.sends_acknowledged({"store": "memory"}) is True
    assert STAN.leader_poll("nats://127.0.0.1:1", {}, {}, False, lambda: None) is None
    assert STAN.name == "stan" and STAN.cell_model is StanCell


def test_the_calibration_shape_is_a_valid_cell() -> None:
    spec = cell(broker=dict(STAN.calibration_broker), measurement=STAN.calibration_measurement)
    assert spec.broker.store == "memory"


# -- the server's config ----------------------------------------------------------------------------------------
def test_the_file_store_config_names_its_directory_and_sync_policy(tmp_path: Path) -> None:
    broker = StanBroker(
        store="file",
        file_sync=False,
        limits={"max_msgs": 500, "max_age": "10m"},
        server={"write_deadline": "5s"},
        streaming={"hb_interval": "10s", "file_options": {"buffer_size": 1024}},
    )
    server = StanServer("0.25.6", broker, tmp_path, "c1", max_payload=2_000_000)
    settings = server.settings(4222, 8222)
    assert settings["listen"] == "127.0.0.1:4222" and settings["http"] == "127.0.0.1:8222"
    assert settings["max_payload"] == 2_000_000 and settings["write_deadline"] == "5s"
    assert settings["streaming"] == {
        "cluster_id": "c1",
        "store": "file",
        "dir": str(tmp_path / "store"),
        "file_options": {"buffer_size": 1024, "sync_on_flush": False},
        "store_limits": {"max_msgs": 500, "max_age": "10m"},
        "hb_interval": "10s",
    }


def test_the_memory_store_config_has_no_directory(tmp_path: Path) -> None:
    server = StanServer("0.25.6", StanBroker(), tmp_path, "c1", host="10.0.0.2")
    settings = server.settings(1, 2)
    assert settings == {
        "listen": "10.0.0.2:1",
        "http": "10.0.0.2:2",
        "authorization": {"user": "sixnines", "password": server.client["password"]},
        "streaming": {"cluster_id": "c1", "store": "memory"},
    }
    assert len(server.client["password"]) >= 24  # a random one per server: nobody else's client gets in


def test_config_text_is_what_the_nats_parser_reads() -> None:
    text = render_config({"listen": "127.0.0.1:1", "streaming": {"store": "file", "file_options": {"sync": True}}})
    assert text == 'listen: "127.0.0.1:1"\nstreaming: {"store": "file", "file_options": {"sync": true}}\n'


def test_max_payload_is_raised_only_for_messages_that_need_it() -> None:
    assert max_payload_for(5 * 1024) is None
    assert max_payload_for(1024 * 1024) == 1024 * 1024 + 4096  # seed 000's 1 MB messages plus the PubMsg envelope
    spec = cell(background={"bulk": {"message_size_bytes": 2_000_000, "rate_per_producer_per_s": 1}})
    assert largest_message(spec) == 2_000_000


def test_a_cell_s_cluster_id_is_its_own_and_valid() -> None:
    assert cluster_id_for(StanBroker(), "c0ffee.r2/x") == "sixnines-c0ffee-r2-x"
    assert cluster_id_for(StanBroker(cluster_id="prod"), "anything") == "prod"


def test_the_docs_example_is_a_valid_system_block() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "stan.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    (entry,) = yaml.safe_load(block)
    assert entry["system"] == "stan"
    spec = cell(version=entry["versions"][0], broker=entry["broker"], client=entry["client"])
    assert (spec.broker.store, spec.broker.file_sync, spec.client.durable) == ("file", False, True)
    assert STAN.label(spec) == "stan/file nosync durable"
