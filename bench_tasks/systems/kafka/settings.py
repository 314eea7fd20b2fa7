"""Kafka settings: the broker and client models and the cell, with the checks only Kafka knows.

Only what the harness itself needs is modelled; everything else passes through untouched.

`server` goes to every broker's server.properties, `topic` to the topic's config, `producer` and
`consumer` to the client library (acks, linger.ms, batch.size, compression.type, enable.idempotence, …) — so a
matrix can sweep any native option without the harness knowing it. `client.library` picks that library:
librdkafka (confluent-kafka, in the Python workers, the default) or Kafka's own Java client (`java`, in the JVM
worker: `jvm_client.py`), whose properties the maps then are.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...releases import is_version
from ...spec.base import setting_path
from ...spec.cell import EXTERNAL_VERSION, BrokerSettings, CellBase, JvmClientSettings
from ...spec.leader import leader_field
from .jvm_client import java_refusals
from .modes import refusals

# server.properties keys that open a listener, or say where one listens or what address it advertises (the last
# four are the pre-listener spellings, read by 3.x): the harness writes each node's listeners itself, on free
# ports of the cell's host address, with the protocol `client.security` asks for.
LISTENER_PROPERTIES = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "controller.listener.names",
        "inter.broker.listener.name",
        "control.plane.listener.name",
        "host.name",
        "port",
        "advertised.host.name",
        "advertised.port",
    }
)


class KafkaBroker(BrokerSettings):
    brokers: Literal[1, 3] = 1
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)
    min_insync_replicas: int = Field(1, ge=1)
    topic: dict[str, Any] = Field(default_factory=dict, description="topic config, verbatim")
    leader: str | None = leader_field()
    server: dict[str, Any] = Field(default_factory=dict, description="server.properties, verbatim")

    @field_validator("server")
    @classmethod
    def _no_listeners(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key in LISTENER_PROPERTIES:
                raise ValueError(
                    f"{setting_path('server', key)}: set by the harness (each node listens on free ports of the "
                    "cell's host address only; client.security picks the protocol)"
                )
        return value

    @model_validator(mode="after")
    def _replicas_fit(self) -> KafkaBroker:
        if self.replication_factor > self.brokers:
            raise ValueError(f"replication_factor {self.replication_factor} exceeds brokers {self.brokers}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"min_insync_replicas {self.min_insync_replicas} exceeds replication_factor {self.replication_factor}"
            )
        return self


class KafkaClient(JvmClientSettings):
    producer: dict[str, Any] = Field(default_factory=dict, description="librdkafka producer config, verbatim")
    consumer: dict[str, Any] = Field(default_factory=dict, description="librdkafka consumer config, verbatim")
    keys: Literal["none", "round_robin", "random", "per_producer"] = Field(
        "none",
        description="none: no key (sticky partitioner); round_robin: partitions in turn; random: a random "
        "key per message; per_producer: one key per producer (seed 004's keyed traffic)",
    )
    consumer_mode: Literal["group", "assigned"] = Field(
        "group", description="group: one consumer group; assigned: partitions split over consumers by hand"
    )
    start_from: Literal["end", "beginning"] = "end"
    security: Literal["plaintext", "ssl", "sasl_plaintext", "sasl_ssl"] | None = Field(
        None,
        description="the client's security protocol, a matrix axis: a provisioned cluster gets the matching "
        "listener (TLS material and SASL users made at start); unset means plaintext, or for external brokers "
        "the connection's `security_protocol`",
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism for security sasl_*; unset means the connection's, else PLAIN"
    )

    DEFAULT_LIBRARY: ClassVar[str] = "librdkafka"
    library: Literal["librdkafka", "java"] = Field(
        "librdkafka",
        description="librdkafka: confluent-kafka in the Python workers; java: Kafka's Java client (the cell's "
        "release's kafka-clients) in the JVM worker (docs/workers.md)",
    )

    @model_validator(mode="after")
    def _sasl_fits(self) -> KafkaClient:
        if self.sasl_mechanism is not None and self.security not in ("sasl_plaintext", "sasl_ssl"):
            raise ValueError(
                f"client.sasl_mechanism {self.sasl_mechanism!r} needs client.security sasl_plaintext or sasl_ssl "
                f"(is {self.security!r})"
            )
        return self


class KafkaCell(CellBase):
    """One fully specified Kafka benchmark cell."""

    SYSTEM: ClassVar[str] = "kafka"  # releases: every kafka_2.13 on Maven Central from 2.4.0 (`release.py`)
    system: Literal["kafka"]
    broker: KafkaBroker = KafkaBroker()
    client: KafkaClient = KafkaClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> KafkaCell:
        if self.measurement == "rtt":
            raise ValueError("measurement 'rtt' is request/reply, which Kafka has not; use 'e2e' or 'publish'")
        if self.workload.lagging_consumers and not self.workload.prefill_messages:
            raise ValueError("workload.lagging_consumers need a backlog to lag behind: set workload.prefill_messages")
        if self.client.consumer_mode == "assigned" and self.measurement == "chain":
            raise ValueError(
                "measurement 'chain' splits its relays and consumers in consumer groups; "
                "use client.consumer_mode 'group'"
            )
        if self.client.consumer_mode == "assigned" and self.workload.consumers > self.broker.partitions:
            raise ValueError(
                f"consumer_mode 'assigned' with {self.workload.consumers} consumers needs at least as many "
                f"partitions (broker.partitions is {self.broker.partitions})"
            )
        for name, bg in self.background.items():
            if bg.replication_factor > self.broker.brokers:
                raise ValueError(
                    f"background.{name}.replication_factor {bg.replication_factor} exceeds broker.brokers "
                    f"{self.broker.brokers}"
                )
        return self

    @model_validator(mode="after")
    def _library_fits(self) -> KafkaCell:
        """What the Java client's path cannot do (yet), refused by field rather than run another way."""
        problems = java_refusals(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _release_fits(self) -> KafkaCell:
        """What the cell's release cannot do (`modes.py`: its metadata mode and line), refused per release; a line or
        `latest` is checked once the run resolved it (the cell is validated again then)."""
        if self.version == EXTERNAL_VERSION or not is_version(self.version):
            return self
        placement = self.workload.placement
        node_hosts = placement is not None and placement.per_node()
        actions = {fault.action for fault in self.faults}
        problems = refusals(self.version, self.client.security, self.client.sasl_mechanism, node_hosts, actions)
        if problems:
            raise ValueError("; ".join(problems))
        return self
