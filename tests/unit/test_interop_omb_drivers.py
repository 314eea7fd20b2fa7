"""OMB's RabbitMQ, Redis, NATS and NATS Streaming driver files → the settings of the cells they import as.

The driver files are OMB's own (tests/data/omb/drivers), read as `sixnines import omb` reads them, and variants of
them with the other values their config classes take (RabbitMqConfig, RedisClientConfig, NatsConfig,
NatsStreamingClientConfig).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_tasks.errors import InteropError
from bench_tasks.interop.omb_workload import Imported, ImportOptions, import_omb
from bench_tasks.systems.nats.settings import NatsCell
from bench_tasks.systems.rabbitmq.settings import RabbitmqCell
from bench_tasks.systems.redis.settings import RedisCell
from bench_tasks.systems.stan.settings import StanCell

OMB = Path(__file__).parents[1] / "data" / "omb"


def omb_file(path: str) -> dict[str, Any]:
    return yaml.safe_load((OMB / path).read_text())


WORKLOAD = omb_file("workloads/1-topic-1-partition-1kb.yaml")
RABBITMQ = omb_file("drivers/driver-rabbitmq/rabbitmq.yaml")
REDIS = omb_file("drivers/driver-redis/redis.yaml")
NATS = omb_file("drivers/driver-nats/nats.yaml")
STAN = omb_file("drivers/driver-nats-streaming/nats-streaming.yaml")


def imported(driver: dict[str, Any], workload: dict[str, Any] = WORKLOAD, **changes: Any) -> Imported:
    return import_omb(workload | changes, "w.yaml", driver, "d.yaml")


def fates(result: Imported, omb: str) -> list[tuple[str | None, Any]]:
    return [(m.sixnines, m.sixnines_value) for m in result.mapped if m.omb == omb]


def test_omb_s_rabbitmq_file_is_a_quorum_queue_behind_a_fanout_exchange_with_confirms() -> None:
    result = imported(RABBITMQ)
    (cell,) = result.matrix.cells
    spec = cell.spec
    assert isinstance(spec, RabbitmqCell)
    b, c = spec.broker, spec.client
    assert (b.queue_type, b.exchange, b.nodes, b.replicas, b.durable, b.persistent) == (
        "quorum",
        "fanout",
        1,  # one address in the file
        1,
        True,  # a quorum queue is durable and on disk whatever messagePersistence says
        True,
    )
    assert (c.confirms, c.acks, c.prefetch) == (True, "auto", 0)
    assert fates(result, "driver.producerCreationDelay") == [(None, None)]  # read, changes nothing measured
    assert not [w for w in result.warnings if "d.yaml" in w]  # every field of the file is carried or moot


def test_a_classic_queue_with_persistent_messages_on_three_nodes() -> None:
    uris = ["amqp://h1:5672", "amqp://h2:5672", "amqp://h3:5672"]
    driver = RABBITMQ | {"queueType": "CLASSIC", "messagePersistence": True, "amqpUris": uris}
    b = imported(driver).matrix.cells[0].spec.broker
    assert (b.queue_type, b.nodes, b.durable, b.persistent) == ("classic", 3, True, True)
    two = imported(RABBITMQ | {"amqpUris": uris[:2]})
    assert two.matrix.cells[0].spec.broker.nodes == 3
    assert any("2 addresses" in w and "a cluster of 3" in w for w in two.warnings)


@pytest.mark.parametrize(
    ("driver", "workload", "says"),
    [
        ({"queueType": "STREAM"}, {}, "queueType: 'STREAM' — RabbitMQ refuses a stream consumer that auto-ack"),
        ({"queueType": "LAZY"}, {}, "queueType: 'LAZY' — one of CLASSIC, QUORUM, STREAM"),
        ({"messagePersistence": "yes"}, {}, "messagePersistence: 'yes' — must be true or false"),
        ({"amqpUris": "amqp://h1"}, {}, "amqpUris: 'amqp://h1' — must be a list of text"),
        ({}, {"partitionsPerTopic": 16}, "partitionsPerTopic: 16 — OMB's RabbitMQ driver refuses a topic of more"),
        ({}, {"consumerBacklogSizeGB": 1}, "consumerBacklogSizeGB: 1 — a prefilled backlog"),
    ],
)
def test_what_rabbitmq_cannot_run_as_omb_asks_is_refused(
    driver: dict[str, Any], workload: dict[str, Any], says: str
) -> None:
    with pytest.raises(InteropError) as caught:
        imported(RABBITMQ | driver, WORKLOAD | workload)
    assert any(says in problem for problem in caught.value.problems), caught.value.problems


def test_rabbitmq_without_a_subscription_warns_that_omb_s_exchange_drops_the_messages() -> None:
    result = imported(RABBITMQ, subscriptionsPerTopic=0, consumerPerSubscription=0)
    assert result.matrix.cells[0].spec.measurement == "publish"
    assert any("exchange drops every message" in w for w in result.warnings)


def test_omb_s_redis_file_is_an_untrimmed_stream_read_without_acks() -> None:
    result = imported(REDIS)
    spec = result.matrix.cells[0].spec
    assert isinstance(spec, RedisCell)
    assert (spec.broker.mode, spec.broker.stream.maxlen, spec.client.noack) == ("streams", None, True)
    assert spec.broker.appendonly is False  # the server's persistence is its deployment's, not the file's
    warned = " ".join(result.warnings)
    assert "jedisPoolMaxTotal: 8" in warned and "jedisPoolMaxIdle: 8" in warned
    assert fates(result, "driver.redisHost") == [(None, None)]
    keyed = imported(REDIS, keyDistributor="RANDOM_NANO")
    assert any("keyDistributor" in w for w in keyed.warnings)
    assert imported(REDIS, subscriptionsPerTopic=0, consumerPerSubscription=0).matrix.cells[0].spec.measurement == (
        "publish"  # the XADD reply
    )


def test_omb_s_nats_streaming_file_is_a_queue_group_on_the_file_store() -> None:
    result = imported(STAN)
    spec = result.matrix.cells[0].spec
    assert isinstance(spec, StanCell)
    b, c = spec.broker, spec.client
    assert (b.store, b.file_sync, b.cluster_id) == ("file", True, None)  # OMB's deployment's store; the cell's id
    assert (c.durable, c.start_position, c.max_in_flight, c.max_pub_acks_in_flight) == (False, "new_only", 1024, 16384)
    flow = imported(STAN | {"maxInFlight": 64, "maxPubAcksInFlight": 256}).matrix.cells[0].spec.client
    assert (flow.max_in_flight, flow.max_pub_acks_in_flight) == (64, 256)
    with pytest.raises(InteropError, match=r"maxInFlight: 0 — at least 1"):
        imported(STAN | {"maxInFlight": 0})


def test_omb_s_nats_file_is_jetstream_r3_and_its_address_sets_nothing() -> None:
    result = imported(NATS)
    spec = result.matrix.cells[0].spec
    assert isinstance(spec, NatsCell)
    assert (spec.broker.mode, spec.broker.replicas, spec.broker.servers, spec.broker.storage) == (
        "jetstream",
        3,
        3,
        "file",
    )
    assert fates(result, "driver.natsHostUrl") == [(None, None)]
    assert not [w for w in result.warnings if "d.yaml" in w]


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        ("rabbitmq", {"broker.exchange": "fanout", "broker.queue_type": "classic", "broker.persistent": False}),
        ("redis", {"broker.mode": "streams", "client.noack": True}),
        ("stan", {"broker.store": "file", "client.durable": False}),
    ],
)
def test_without_a_driver_file_the_cell_is_what_omb_s_driver_does_by_default(
    system: str, expected: dict[str, Any]
) -> None:
    result = import_omb(WORKLOAD, "w.yaml", options=ImportOptions(system))
    spec = result.matrix.cells[0].spec.model_dump()
    for path, value in expected.items():
        section, name = path.split(".")
        assert spec[section][name] == value, path


def test_a_system_that_speaks_another_s_protocol_reads_its_driver_file_when_asked() -> None:
    """OMB's Redis driver file is a redis cell, or a valkey one with `--system valkey`."""
    assert imported(REDIS).matrix.cells[0].spec.system == "redis"
    valkey = import_omb(WORKLOAD, "w.yaml", REDIS, "d.yaml", ImportOptions("valkey"))
    assert (valkey.matrix.cells[0].spec.system, valkey.matrix.cells[0].spec.broker.mode) == ("valkey", "streams")
    assert import_omb(WORKLOAD, "w.yaml", REDIS, "d.yaml", ImportOptions("kafka")).matrix.cells[0].spec.system == (
        "redis"  # the file's class, which Kafka does not read
    )


@pytest.mark.parametrize("driver", [RABBITMQ, REDIS, NATS, STAN])
def test_omb_s_max_rate_mode_is_a_capacity_search_on_every_system(driver: dict[str, Any]) -> None:
    """OMB's own max-rate workloads have several partitions, which its RabbitMQ driver refuses: one partition
    here, so every system's cell is searched."""
    result = imported(driver, producerRate=0)
    assert result.matrix.capacity is not None and result.matrix.capacity.objectives == ["backlog p99 < 1000 msgs"]
    assert result.matrix.cells[0].spec.workload.rate_per_s == 10_000
