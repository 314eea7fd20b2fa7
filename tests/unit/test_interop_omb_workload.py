"""bench_tasks.interop.omb_workload: OMB workload and driver files → sixnines matrices.

The fixtures are written from OMB's documented format (the fields of its `Workload` class and of its Kafka and
NATS driver configs) in the shapes OMB publishes: a 1-topic latency workload, a backlog workload, a
100-topic workload, a max-rate workload; the Kafka latency and exactly-once drivers and the NATS driver.
"""

from __future__ import annotations

import pytest
import yaml

from bench_tasks.errors import InteropError
from bench_tasks.interop.omb_workload import ImportOptions, import_omb, matrix_yaml
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.kafka.settings import KafkaCell
from bench_tasks.systems.nats.settings import NatsCell

KAFKA = ImportOptions("kafka")  # the system to map onto when no driver file names one

ONE_TOPIC = {
    "name": "1 topic / 1 partition / 1Kb",
    "topics": 1,
    "partitionsPerTopic": 1,
    "keyDistributor": "NO_KEY",
    "messageSize": 1024,
    "payloadFile": "payload/payload-1Kb.data",
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 1,
    "producersPerTopic": 1,
    "producerRate": 50000,
    "consumerBacklogSizeGB": 0,
    "testDurationMinutes": 15,
}
BACKLOG = {
    "name": "Backlog 4p 4c on 1 topic / 100 partitions",
    "topics": 1,
    "partitionsPerTopic": 100,
    "messageSize": 1024,
    "useRandomizedPayloads": True,
    "randomBytesRatio": 0.5,
    "randomizedPayloadPoolSize": 1000,
    "subscriptionsPerTopic": 1,
    "consumerPerSubscription": 4,
    "producersPerTopic": 4,
    "producerRate": 200000,
    "consumerBacklogSizeGB": 2,
    "testDurationMinutes": 5,
}
KAFKA_LATENCY = {
    "name": "Kafka",
    "driverClass": "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver",
    "replicationFactor": 3,
    "topicConfig": "min.insync.replicas=2\n",
    "commonConfig": "bootstrap.servers=localhost:9092\n",
    "producerConfig": "acks=all\nlinger.ms=1\nbatch.size=131072\n",
    "consumerConfig": "auto.offset.reset=earliest\nenable.auto.commit=false\nmax.partition.fetch.bytes=10485760\n",
}
NATS_DRIVER = {
    "name": "NATS",
    "driverClass": "io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver",
    "natsHostUrl": "localhost:4222",
    "replicationFactor": 3,
}


def _mapped(imported, omb: str) -> list[tuple[str | None, object]]:
    return [(m.sixnines, m.sixnines_value) for m in imported.mapped if m.omb == omb]


def test_one_topic_latency_workload_with_the_kafka_latency_driver() -> None:
    imported = import_omb(ONE_TOPIC, "1-topic.yaml", KAFKA_LATENCY, "kafka-latency.yaml", options=KAFKA)
    (cell,) = imported.matrix.cells
    spec = cell.spec
    assert isinstance(spec, KafkaCell)
    assert spec.measurement == "e2e"
    w = spec.workload
    assert (w.message_size_bytes, w.rate_per_s, w.producers, w.consumers) == (1024, 50000, 1, 1)
    assert (w.measure_s, w.warmup_s) == (900, 60)  # 15 min; OMB's default warmup is 1 min
    b = spec.broker
    assert (b.brokers, b.partitions, b.replication_factor, b.min_insync_replicas) == (3, 1, 3, 2)
    assert spec.client.producer == {"acks": "all", "linger.ms": 1, "batch.size": 131072}
    assert spec.client.consumer == {"max.partition.fetch.bytes": 10485760}
    assert spec.client.keys == "none"
    assert cell.origin is not None and cell.origin["workload_name"] == "1 topic / 1 partition / 1Kb"
    warned = " ".join(imported.warnings)
    for name in ("payloadFile", "bootstrap.servers", "auto.offset.reset", "enable.auto.commit"):
        assert name in warned
    assert warned.count("bootstrap.servers") == 1  # commonConfig applies to both clients, warned once


def test_every_field_read_is_accounted_for() -> None:
    imported = import_omb(ONE_TOPIC, "1-topic.yaml", KAFKA_LATENCY, "kafka-latency.yaml", options=KAFKA)
    accounted = {m.omb for m in imported.mapped}
    assert set(ONE_TOPIC) - {"name", "consumerBacklogSizeGB"} <= accounted
    for key in ("replicationFactor", "producerConfig.linger.ms", "topicConfig.min.insync.replicas"):
        assert f"driver.{key}" in accounted
    assert _mapped(imported, "driver.producerConfig.linger.ms") == [("client.producer.linger.ms", 1)]


def test_backlog_becomes_prefill_and_lagging_consumers() -> None:
    imported = import_omb(BACKLOG, "backlog.yaml", options=KAFKA)
    w = imported.matrix.cells[0].spec.workload
    assert w.prefill_messages == 2 * 1024**3 // 1024
    assert w.lagging_consumers == 4
    assert imported.matrix.cells[0].spec.broker.partitions == 100
    assert any("randomBytesRatio" in warning for warning in imported.warnings)  # 50 % zeros compress; ours do not


def test_several_topics_measure_one_at_its_rate_and_load_the_others_as_background() -> None:
    """OMB's 100 topics at 500,000 msg/s: the cell measures one topic at 5,000 msg/s with its 4 producers and 4
    consumers; the other 99 topics' 396 producers (1,250 msg/s each) and their 198 partitions are the background,
    laid out and configured as the measured topic, and the two add up to OMB's load."""
    workload = {
        **ONE_TOPIC,
        "topics": 100,
        "partitionsPerTopic": 2,
        "keyDistributor": "KEY_ROUND_ROBIN",
        "producersPerTopic": 4,
        "consumerPerSubscription": 4,
        "producerRate": 500000,
    }
    imported = import_omb(workload, "100-topic.yaml", KAFKA_LATENCY, "k.yaml", options=KAFKA)
    (cell,) = imported.matrix.cells
    w, bg = cell.spec.workload, cell.spec.background["other_topics"]
    assert (w.rate_per_s, w.producers, w.consumers, cell.spec.broker.partitions) == (5000, 4, 4, 2)
    assert (bg.producers, bg.processes, bg.rate_per_producer_per_s, bg.consumers) == (396, 4, 1250, 4)
    assert w.rate_per_s + bg.rate_per_s == 500000 and not bg.follows_rate
    assert (bg.partitions, bg.keys, bg.replication_factor, bg.message_size_bytes) == (198, "round_robin", 3, 1024)
    assert bg.topic == {"min.insync.replicas": 2} and bg.producer == cell.spec.client.producer
    fields = {m.sixnines for m in imported.mapped if m.sixnines and m.sixnines.startswith("background.")}
    assert {f"background.other_topics.{f}" for f in type(bg).model_fields} - fields == {
        "background.other_topics.arrival",  # uniform, as OMB's rate limiter and the measured producers
        "background.other_topics.follows_rate",  # a fixed rate
        "background.other_topics.subscriptions",  # one
    }
    assert not [warning for warning in imported.warnings if "topics" in warning]


def test_a_million_topics_validate_with_the_background_topic_at_the_partitions_kraft_creates() -> None:
    """OMB's 1m-topic workload: four million logical producers validate as they are; the background topic stops at
    the 10,000 partitions KRaft creates in one request, with a warning giving both numbers."""
    workload = {**ONE_TOPIC, "topics": 1_000_000, "producersPerTopic": 4, "consumerPerSubscription": 4}
    imported = import_omb({**workload, "producerRate": 500000}, "1m-topic.yaml", KAFKA_LATENCY, "k.yaml", KAFKA)
    (cell,) = imported.matrix.cells
    bg = cell.spec.background["other_topics"]
    assert (bg.producers, bg.processes, bg.partitions, cell.spec.workload.rate_per_s) == (3_999_996, 4, 10_000, 0.5)
    (warning,) = [w for w in imported.warnings if "1m-topic.yaml: topics: 1000000" in w]
    assert "999,999 partitions" in warning and "10,001 partitions, not OMB's 1,000,000" in warning


def test_several_topics_in_max_rate_mode_search_one_topics_rate_with_the_others_following() -> None:
    """producerRate 0 over 10 topics: the search starts at OMB's 10,000 msg/s over all topics, 1,000 for the
    measured one, and every step scales the other topics' rate with it."""
    from bench_tasks.capacity.run import at_rate

    workload = {**ONE_TOPIC, "topics": 10, "producersPerTopic": 2, "producerRate": 0}
    imported = import_omb(workload, "max-rate-10.yaml", KAFKA_LATENCY, "k.yaml", options=KAFKA)
    (cell,) = imported.matrix.cells
    assert imported.matrix.capacity is not None and imported.matrix.capacity.max_rate_per_s == 1_000_000
    bg = cell.spec.background["other_topics"]
    assert (cell.spec.workload.rate_per_s, bg.producers, bg.rate_per_producer_per_s) == (1000, 18, 500)
    assert bg.follows_rate
    step = at_rate(cell, 4000).spec
    assert step.workload.rate_per_s + step.background["other_topics"].rate_per_s == 40_000  # OMB's total at 4000
    assert any("10 times it" in m.note for m in imported.mapped if m.omb == "producerRate")


def test_several_topics_on_a_system_without_partitions_share_one_background_route() -> None:
    workload = {**ONE_TOPIC, "topics": 50, "partitionsPerTopic": 3, "producerRate": 100000}
    imported = import_omb(workload, "50-topic.yaml", NATS_DRIVER, "nats.yaml")
    (cell,) = imported.matrix.cells
    bg = cell.spec.background["other_topics"]
    assert (cell.spec.workload.rate_per_s, bg.producers, bg.rate_per_s, bg.partitions) == (2000, 49, 98000, 1)
    assert any("share one background stream" in m.note for m in imported.mapped if m.omb == "topics")


def test_several_subscriptions_read_the_other_topics_on_kafka_and_warn_of_the_measured_topics() -> None:
    """OMB's 3 subscriptions per topic: on Kafka the background's consumer groups read the other 99 topics 3
    times; the measured topic has one subscription, and the warning says its other 2 are not read. NATS carries
    none of them, and says so."""
    workload = {**ONE_TOPIC, "topics": 100, "subscriptionsPerTopic": 3, "producerRate": 150000}
    imported = import_omb(workload, "100-topics.yaml", KAFKA_LATENCY, "k.yaml", options=KAFKA)
    (warning,) = [w for w in imported.warnings if "subscriptionsPerTopic" in w]
    assert warning.startswith("100-topics.yaml: subscriptionsPerTopic: 3") and "measured topic's other 2" in warning
    spec = imported.matrix.cells[0].spec
    bg = spec.background["other_topics"]
    assert (spec.workload.consumers, bg.subscriptions, bg.consumers) == (1, 3, 1)  # 4 processes at most: 1 a group
    on_nats = import_omb(workload, "100-topics.yaml", NATS_DRIVER, "nats.yaml")
    (warning,) = [w for w in on_nats.warnings if "subscriptionsPerTopic" in w]
    assert "the other 2 subscriptions' deliveries" in warning
    bg = on_nats.matrix.cells[0].spec.background["other_topics"]
    assert (bg.subscriptions, bg.consumers) == (1, 4)


def test_max_rate_mode_is_a_capacity_search_held_to_what_omb_calls_sustainable() -> None:
    """producerRate 0: OMB's search starts at 10,000 msg/s and holds a rate while fewer than 1000 messages are
    published and not yet received; here a capacity search from the same rate, held to the same backlog and to
    losing nothing, written into the matrix file and read back from it."""
    imported = import_omb({**ONE_TOPIC, "producerRate": 0}, "max-rate.yaml", KAFKA_LATENCY, "k.yaml", options=KAFKA)
    capacity = imported.matrix.capacity
    assert capacity is not None
    assert capacity.objectives == ["backlog p99 < 1000 msgs"]
    assert (capacity.max_rate_per_s, capacity.factor, capacity.resolution) == (10_000_000, 2.0, 0.05)
    (cell,) = imported.matrix.cells
    assert (cell.spec.workload.rate_per_s, cell.spec.workload.allowed_loss_ratio) == (10_000, 0.0)
    targets = [path for path, _ in _mapped(imported, "producerRate")]
    assert "capacity.objectives" in targets and "workload.allowed_loss_ratio" in targets
    text = matrix_yaml(imported)
    assert "`capacity:` search" in text.splitlines()[2]
    again = parse_matrix(yaml.safe_load(text), "again.yaml")
    assert again.capacity == capacity and [c.id for c in again.cells] == [cell.id]
    (length,) = [m.note for m in imported.mapped if m.omb == "producerRate" and m.sixnines is None]
    assert "at most 15 steps, each a whole cell of 960 s" in length  # 10,000/s doubling to 10 M, then bisection


def test_max_rate_mode_with_a_backlog_is_refused_as_omb_refuses_it() -> None:
    with pytest.raises(InteropError, match=r"producerRate: 0 — OMB's max-rate search cannot run while a backlog"):
        import_omb({**BACKLOG, "producerRate": 0}, "w.yaml", options=KAFKA)
    with pytest.raises(InteropError, match=r"producerRate: -1 — a rate of messages per second, or 0"):
        import_omb({**ONE_TOPIC, "producerRate": -1}, "w.yaml", options=KAFKA)


def test_every_problem_is_listed_with_its_file_and_field() -> None:
    bad = {**ONE_TOPIC, "messageSize": 10, "partitionsPerTopic": 0, "keyDistributor": "ZIPF", "retries": 3}
    with pytest.raises(InteropError) as caught:
        import_omb(bad, "w.yaml", options=KAFKA)
    problems = caught.value.problems
    assert any(p.startswith("w.yaml: retries: 3 — not a field of OMB's Workload") for p in problems)
    assert any(p.startswith("w.yaml: messageSize: 10 — smaller than the 32-byte header") for p in problems)
    assert any(p.startswith("w.yaml: partitionsPerTopic: 0 — at least 1") for p in problems)
    assert any(p.startswith("w.yaml: keyDistributor: 'ZIPF'") for p in problems)


def test_wrong_types_are_refused() -> None:
    with pytest.raises(InteropError, match=r"w.yaml: producerRate: '1k' — must be a whole number"):
        import_omb({**ONE_TOPIC, "producerRate": "1k"}, "w.yaml", options=KAFKA)


def test_key_distributors_map_to_client_keys() -> None:
    for omb, keys in (("NO_KEY", "none"), ("KEY_ROUND_ROBIN", "round_robin"), ("RANDOM_NANO", "random")):
        imported = import_omb({**ONE_TOPIC, "keyDistributor": omb}, "w.yaml", options=KAFKA)
        assert imported.matrix.cells[0].spec.client.keys == keys


def test_no_subscription_measures_publish_latency() -> None:
    imported = import_omb(
        {**ONE_TOPIC, "subscriptionsPerTopic": 0, "consumerPerSubscription": 0}, "w.yaml", options=KAFKA
    )
    spec = imported.matrix.cells[0].spec
    assert (spec.measurement, spec.workload.consumers) == ("publish", 0)


def test_nats_driver_is_jetstream_with_replicas() -> None:
    imported = import_omb(ONE_TOPIC, "w.yaml", NATS_DRIVER, "nats.yaml", options=KAFKA)
    spec = imported.matrix.cells[0].spec
    assert isinstance(spec, NatsCell)
    assert (spec.broker.mode, spec.broker.storage, spec.broker.replicas, spec.broker.servers) == (
        "jetstream",
        "file",  # OMB's NATS driver default
        3,
        3,
    )


def test_nats_refuses_a_backlog_and_kafka_only_driver_fields() -> None:
    with pytest.raises(InteropError, match="consumerBacklogSizeGB"):
        import_omb(BACKLOG, "w.yaml", NATS_DRIVER, "nats.yaml", options=KAFKA)
    with pytest.raises(InteropError, match=r"nats.yaml: producerConfig: .* not a field of OMB's nats driver"):
        import_omb(ONE_TOPIC, "w.yaml", {**NATS_DRIVER, "producerConfig": "acks=all"}, "nats.yaml", options=KAFKA)


def test_unknown_driver_class_is_refused() -> None:
    driver = {"name": "Pulsar", "driverClass": "io.openmessaging.benchmark.driver.pulsar.PulsarBenchmarkDriver"}
    with pytest.raises(InteropError, match=r"pulsar.yaml: .*driverClass: .*PulsarBenchmarkDriver"):
        import_omb(ONE_TOPIC, "w.yaml", driver, "pulsar.yaml", options=KAFKA)


def test_java_property_names_become_librdkafka_names() -> None:
    driver = {
        **KAFKA_LATENCY,
        "producerConfig": "buffer.memory=33554432\nmax.request.size=2097152\nmax.block.ms=60000\n",
        "consumerConfig": "fetch.max.wait.ms=5\nmax.poll.records=500\n",
        "commonConfig": "bootstrap.servers=x:9092\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=plain\n",
    }
    imported = import_omb(ONE_TOPIC, "w.yaml", driver, "k.yaml", options=KAFKA)
    client = imported.matrix.cells[0].spec.client
    assert client.producer == {"queue.buffering.max.kbytes": 32768, "message.max.bytes": 2097152}
    assert client.consumer == {"fetch.wait.max.ms": 5}
    assert (client.security, client.sasl_mechanism) == ("sasl_plaintext", "PLAIN")
    warned = " ".join(imported.warnings)
    assert "max.block.ms" in warned and "max.poll.records" in warned


def test_duration_overrides_are_recorded() -> None:
    imported = import_omb(ONE_TOPIC, "w.yaml", options=ImportOptions("kafka", warmup_s=1, measure_s=3))
    w = imported.matrix.cells[0].spec.workload
    assert (w.warmup_s, w.measure_s) == (1, 3)
    (entry,) = [m for m in imported.mapped if m.omb == "testDurationMinutes"]
    assert "900 s overridden" in entry.note


def test_written_matrix_parses_back_to_the_same_cells() -> None:
    imported = import_omb(BACKLOG, "backlog.yaml", KAFKA_LATENCY, "kafka-latency.yaml", options=KAFKA)
    text = matrix_yaml(imported)
    assert text.startswith("# Imported by `sixnines import omb`")
    assert "# WARNING" in text
    again = parse_matrix(yaml.safe_load(text), "again.yaml")
    assert [c.id for c in again.cells] == [c.id for c in imported.matrix.cells]
    assert again.cells[0].origin == imported.matrix.cells[0].origin


def test_origin_does_not_change_cell_ids() -> None:
    imported = import_omb(ONE_TOPIC, "w.yaml", options=KAFKA)
    raw = dict(imported.raw)
    raw.pop("origin")
    assert parse_matrix(raw, "plain.yaml").cells[0].id == imported.matrix.cells[0].id
