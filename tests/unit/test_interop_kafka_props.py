"""bench_tasks.systems.kafka.omb_props: Java Kafka client properties in librdkafka's terms.

The last test hands every librdkafka name the rules produce to the real librdkafka (confluent-kafka): a
client that is created and closed without connecting anywhere, so no broker is involved and none is mocked."""

from __future__ import annotations

import pytest

from bench_tasks.systems.kafka.omb_props import RULES, parse_properties, translate


def test_properties_block_is_parsed_with_types() -> None:
    text = "# comment\n! also a comment\nacks = all\nlinger.ms=1\nenable.idempotence=true\nclient.id: x\n\n"
    assert parse_properties(text) == {"acks": "all", "linger.ms": 1, "enable.idempotence": True, "client.id": "x"}


def test_continuation_lines_are_joined() -> None:
    assert parse_properties("sasl.jaas.config=a \\\n  b\nacks=1") == {"sasl.jaas.config": "a b", "acks": 1}


def test_a_line_without_separator_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match=r"line 2 'lingerms' is not `name=value`"):
        parse_properties("acks=1\nlingerms\n")


def test_renamed_and_converted() -> None:
    t = translate("buffer.memory", 33554432, "producer")
    assert (t.target, t.value, t.warning) == ("queue.buffering.max.kbytes", 32768, False)
    t = translate("fetch.max.wait.ms", 10, "consumer")
    assert (t.target, t.value) == ("fetch.wait.max.ms", 10)
    t = translate("partition.assignment.strategy", "org.apache.kafka.clients.consumer.RoundRobinAssignor", "consumer")
    assert t.value == "roundrobin"


def test_harness_owned_and_missing_are_not_passed() -> None:
    for name, role in (("group.id", "consumer"), ("max.block.ms", "producer"), ("bootstrap.servers", "producer")):
        t = translate(name, "x", role)
        assert t.target is None and t.warning
    t = translate("request.timeout.ms", 1200000, "producer")  # kafka-throughput.yaml's; librdkafka's range ends lower
    assert (t.target, t.value, t.warning) == ("request.timeout.ms", 900000, True) and "at most 900000" in t.note
    assert translate("request.timeout.ms", 30000, "producer").value == 30000
    for role in ("producer", "consumer"):  # OMB's kafka-throughput.yaml sets it; librdkafka refuses the name
        t = translate("default.api.timeout.ms", 1200000, role)
        assert t.target is None and t.warning and "no equivalent" in t.note


def test_unknown_names_pass_through_with_a_warning() -> None:
    t = translate("queue.buffering.max.messages", 1000, "producer")
    assert (t.target, t.value, t.warning) == ("queue.buffering.max.messages", 1000, True)


def test_unknown_assignor_is_an_error() -> None:
    with pytest.raises(ValueError, match="StickyAssignor"):
        translate("partition.assignment.strategy", "org.apache.kafka.clients.consumer.StickyAssignor", "consumer")


SAMPLE_VALUES = {
    "acks": "all",
    "compression.type": "zstd",
    "enable.idempotence": True,
    "isolation.level": "read_committed",
    "check.crcs": True,
    "client.rack": "r1",
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor",
    "max.in.flight.requests.per.connection": 5,  # librdkafka's limit with idempotence
    "delivery.timeout.ms": 120000,
    "request.timeout.ms": 30000,
    "linger.ms": 5,
    "transaction.timeout.ms": 60000,
    "buffer.memory": 33554432,
    "max.request.size": 1048576,
    "fetch.max.bytes": 52428800,
    "max.partition.fetch.bytes": 1048576,
    "session.timeout.ms": 45000,
    "heartbeat.interval.ms": 3000,
    "max.poll.interval.ms": 300000,
}


@pytest.mark.parametrize("role", ["producer", "consumer"])
def test_librdkafka_accepts_every_name_the_rules_produce(role: str) -> None:
    import confluent_kafka

    config = {"bootstrap.servers": "127.0.0.1:9", "error_cb": lambda _: None}
    if role == "consumer":
        config["group.id"] = "sixnines-props-test"
    for name, rule in RULES[role].items():
        if rule.target is not None:
            config[rule.target] = rule.convert(SAMPLE_VALUES.get(name, 1000))
    client = confluent_kafka.Producer(config) if role == "producer" else confluent_kafka.Consumer(config)
    if role == "consumer":
        client.close()
    else:
        client.flush(0)
