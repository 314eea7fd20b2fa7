"""Java Kafka client properties (what OMB's Kafka driver files hold) in librdkafka's terms (what sixnines' Kafka
driver hands to confluent-kafka).

Most names mean the same in both clients; a few differ in name or unit, some belong to the harness (it sets
them itself for every cell) and some have no librdkafka equivalent. Every Java name a rule knows says which
of these it is; a name no rule knows passes through verbatim with a warning, and librdkafka refuses it when
the client is created if it does not know it either. Pure functions; nothing here talks to Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Role = Literal["producer", "consumer"]


@dataclass(frozen=True)
class Rule:
    """What happens to one Java property: `target` is the librdkafka name (None: not passed on)."""

    target: str | None
    note: str
    convert: Callable[[Any], Any] = lambda value: value
    most: int | None = None  # the largest value librdkafka accepts (it refuses the client otherwise)


SAME = "same name and meaning in librdkafka"
HARNESS = "set by the harness for every cell"


def _kib(value: Any) -> int:
    return max(1, int(value) // 1024)


_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def _assignors(value: Any) -> str:
    names = [v.strip() for v in str(value).split(",") if v.strip()]
    unknown = [n for n in names if n not in _ASSIGNORS and n not in _ASSIGNORS.values()]
    if unknown:
        raise ValueError(f"no librdkafka assignor for {', '.join(unknown)} (librdkafka has {', '.join(_ASSIGNORS)})")
    return ",".join(_ASSIGNORS.get(n, n) for n in names)


_COMMON: dict[str, Rule] = {
    "bootstrap.servers": Rule(None, "the harness provisions the brokers (external brokers: `brokers: external`)"),
    "client.id": Rule(None, HARNESS + " (each producer and consumer is named)"),
    "default.api.timeout.ms": Rule(
        None, "no equivalent: the Java clients' bound on a blocking API call; librdkafka's calls each take their own"
    ),
    "retry.backoff.ms": Rule("retry.backoff.ms", SAME),
    "reconnect.backoff.ms": Rule("reconnect.backoff.ms", SAME),
    "reconnect.backoff.max.ms": Rule("reconnect.backoff.max.ms", SAME),
    "metadata.max.age.ms": Rule("metadata.max.age.ms", SAME),
    "connections.max.idle.ms": Rule("connections.max.idle.ms", SAME),
    "send.buffer.bytes": Rule("socket.send.buffer.bytes", "librdkafka's name for the socket send buffer"),
    "receive.buffer.bytes": Rule("socket.receive.buffer.bytes", "librdkafka's name for the socket receive buffer"),
    "sasl.jaas.config": Rule(None, "credentials come from the cell's connection, never from a matrix file"),
    "ssl.truststore.location": Rule(None, "TLS material comes from the cell's connection (PEM), not a Java keystore"),
    "ssl.truststore.password": Rule(None, "TLS material comes from the cell's connection (PEM), not a Java keystore"),
}

_PRODUCER: dict[str, Rule] = {
    **{
        name: Rule(name, SAME)
        for name in (
            "acks",
            "linger.ms",
            "compression.type",
            "enable.idempotence",
            "retries",
            "max.in.flight.requests.per.connection",
            "delivery.timeout.ms",
            "transaction.timeout.ms",
        )
    },
    "request.timeout.ms": Rule("request.timeout.ms", SAME, most=900_000),
    "batch.size": Rule("batch.size", "same name: the per-partition batch limit in bytes (librdkafka ≥ 1.5)"),
    "max.request.size": Rule("message.max.bytes", "librdkafka's name for the largest request"),
    "buffer.memory": Rule("queue.buffering.max.kbytes", "bytes → KiB: librdkafka sizes its send queue in KiB", _kib),
    "max.block.ms": Rule(None, "no equivalent: librdkafka never blocks a send; a full queue is a counted send error"),
    "key.serializer": Rule(None, "the harness sends its own stamped bytes (no serializer)"),
    "value.serializer": Rule(None, "the harness sends its own stamped bytes (no serializer)"),
    "transactional.id": Rule(None, "no equivalent: sixnines does not measure transactions"),
    "partitioner.class": Rule(None, "keys decide partitions: the workload's keyDistributor → client.keys"),
}

_CONSUMER: dict[str, Rule] = {
    **{
        name: Rule(name, SAME)
        for name in (
            "fetch.min.bytes",
            "fetch.max.bytes",
            "max.partition.fetch.bytes",
            "session.timeout.ms",
            "heartbeat.interval.ms",
            "isolation.level",
            "max.poll.interval.ms",
            "check.crcs",
            "client.rack",
        )
    },
    "fetch.max.wait.ms": Rule("fetch.wait.max.ms", "librdkafka's name for the broker's fetch wait"),
    "partition.assignment.strategy": Rule(
        "partition.assignment.strategy", "Java assignor classes → librdkafka assignor names", _assignors
    ),
    "group.id": Rule(None, HARNESS + " (one group per cell topic)"),
    "auto.offset.reset": Rule(None, HARNESS + ": measured consumers read from the end (client.start_from)"),
    "enable.auto.commit": Rule(None, HARNESS + " (false: offsets are never what is measured)"),
    "auto.commit.interval.ms": Rule(None, HARNESS + " (auto commit is off)"),
    "key.deserializer": Rule(None, "the harness reads its own stamped bytes (no deserializer)"),
    "value.deserializer": Rule(None, "the harness reads its own stamped bytes (no deserializer)"),
    "max.poll.records": Rule(None, "no equivalent: librdkafka hands over messages one at a time"),
    "request.timeout.ms": Rule(None, "a producer-only property in librdkafka (its consumer would ignore it)"),
}

RULES: dict[Role, dict[str, Rule]] = {"producer": {**_COMMON, **_PRODUCER}, "consumer": {**_COMMON, **_CONSUMER}}


@dataclass(frozen=True)
class Translated:
    """One Java property's fate: `target`/`value` when passed on, `note` always, `warning` when not carried
    or not known."""

    java: str
    java_value: Any
    target: str | None
    value: Any
    note: str
    warning: bool


def translate(name: str, value: Any, role: Role) -> Translated:
    """The librdkafka form of one Java client property for `role`. ValueError when a value cannot be converted."""
    rule = RULES[role].get(name)
    if rule is None:
        note = "not known to the importer: passed to librdkafka verbatim (it refuses names it does not know)"
        return Translated(name, value, name, value, note, True)
    if rule.target is None:
        return Translated(name, value, None, None, rule.note, True)
    if rule.most is not None and isinstance(value, int) and value > rule.most:
        note = f"librdkafka accepts at most {rule.most} (it refuses the client above): {rule.most}, not {value}"
        return Translated(name, value, rule.target, rule.most, note, True)
    return Translated(name, value, rule.target, rule.convert(value), rule.note, False)


def parse_properties(text: str) -> dict[str, Any]:
    """A Java `.properties` block (OMB's `producerConfig: |` …) as a dict; digits become ints and
    true/false booleans, so a matrix reads naturally. ValueError names the line without a separator."""
    out: dict[str, Any] = {}
    for number, raw in enumerate(_logical_lines(text), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ValueError(f"line {number} {line!r} is not `name=value`")
        out[line[:cut].strip()] = _typed(line[cut + 1 :].strip())
    return out


def _logical_lines(text: str) -> list[str]:
    """Lines with Java's backslash continuations joined."""
    lines: list[str] = []
    pending = ""
    for line in str(text).splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].strip() if pending else line.rstrip()[:-1]
            continue
        lines.append(pending + (line.strip() if pending else line))
        pending = ""
    return lines + ([pending] if pending else [])


def _typed(value: str) -> Any:
    if value.isdigit():
        return int(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def translate_all(props: Mapping[str, Any], role: Role) -> list[Translated]:
    return [translate(name, value, role) for name, value in props.items()]
