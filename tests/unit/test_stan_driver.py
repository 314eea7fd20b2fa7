"""The NATS Streaming driver's pure parts: the cell's channel, client ids the server accepts, the subscription a
cell asks for, what it promises of acknowledged messages, and how an external server is reached."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.brokers.connections import BrokerConnection
from bench_tasks.errors import BrokerError
from bench_tasks.systems import system
from bench_tasks.systems.stan import STAN
from bench_tasks.systems.stan.access import client_access
from bench_tasks.systems.stan.driver import (
    DURABLE_NAME,
    QUEUE_GROUP,
    StanDriver,
    client_id_for,
    subject_for,
    subscription_options,
)
from bench_tasks.systems.stan.requests import subscription_request
from bench_tasks.systems.stan.settings import StanCell


def cell(**overrides: Any) -> StanCell:
    raw = {
        "system": "stan",
        "version": "latest",
        "workload": {"message_size_bytes": 256, "rate_per_s": 50, "measure_s": 30},
        "measurement": "e2e",
        **overrides,
    }
    return StanCell.model_validate(raw)


def test_stan_is_a_registered_system() -> None:
    assert system("stan") is STAN


def test_each_route_is_a_channel_of_the_cell() -> None:
    assert subject_for("abc123") == "sixnines.abc123"
    assert subject_for("abc123", "bg-traffic") == "sixnines.abc123.bg-traffic"


def test_client_ids_are_in_the_server_s_alphabet_and_never_repeat() -> None:
    ids = {client_id_for("sixnines-bg-my traffic.0") for _ in range(50)}
    assert len(ids) == 50
    assert all(i.startswith("sixnines-bg-my-traffic-0-") and i.replace("-", "").isalnum() for i in ids)


def test_a_cell_s_consumers_are_one_queue_group_acknowledged_by_the_driver() -> None:
    opts = subscription_options(cell())
    assert (opts.queue, opts.durable, opts.start_position, opts.manual_acks) == (QUEUE_GROUP, "", "new_only", True)
    assert (opts.max_in_flight, opts.ack_wait_s) == (1024, 30)


def test_a_durable_cell_names_its_durable_and_its_start() -> None:
    client = {"durable": True, "start_position": "time_delta", "start_time_delta_s": 1.5, "max_in_flight": 8}
    opts = subscription_options(cell(client=client))
    assert (opts.durable, opts.max_in_flight, opts.start_time_delta_ns) == (DURABLE_NAME, 8, 1_500_000_000)
    req = subscription_request("c", "s", "inbox", opts)
    assert (req.qGroup, req.durableName, req.startTimeDelta) == (QUEUE_GROUP, DURABLE_NAME, 1_500_000_000)


def test_only_the_file_store_is_held_to_no_acknowledged_loss() -> None:
    assert STAN.delivery_guaranteed({"broker": {"store": "file", "file_sync": False}}) is True
    assert STAN.delivery_guaranteed({"broker": {"store": "memory"}}) is False
    assert STAN.acked_metric({"measurement": "e2e", "broker": {"store": "memory"}}) == "publish"


def test_the_driver_needs_a_cluster_id() -> None:
    with pytest.raises(BrokerError, match="no cluster id"):
        StanDriver("nats://127.0.0.1:1", cell(), "c")
    assert StanDriver("nats://127.0.0.1:1", cell(), "c", client={"cluster_id": "x"}).cluster_id == "x"


def test_the_driver_reaches_the_cluster_its_brokers_name_without_passing_it_to_nats() -> None:
    d = StanDriver("nats://127.0.0.1:1", cell(), "c", "bg-x", {"cluster_id": "mine", "user": "u", "password": "p"})
    assert (d.cluster_id, d.access, d.subject, d.acks) == (
        "mine",
        {"user": "u", "password": "p"},
        "sixnines.c.bg-x",
        True,
    )


def test_an_external_server_is_reached_as_nats_with_the_matrix_s_cluster_id() -> None:
    spec = cell(brokers="external", connection="my_stan", version="external", broker={"cluster_id": "prod-stan"})
    conn = BrokerConnection("my_stan", host="stan-1.example.net", login="bench", password="secret")
    access = client_access(conn, spec)
    assert access.address == "nats://stan-1.example.net:4222"
    assert access.client == {"user": "bench", "password": "secret"}
    assert access.described["cluster_id"] == "prod-stan" and "secret" not in str(access.described)
    assert StanDriver(access.address, spec, "c", client=access.client).cluster_id == "prod-stan"
