"""Kafka's settings model: only what the harness itself needs; everything else passes through untouched.

`server` goes to every broker's server.properties, `topic` to the topic's config, `producer` and
`consumer` to librdkafka (acks, linger.ms, batch.size, compression.type, enable.idempotence, …) — so a
matrix can sweep any native option without the harness knowing it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from .systems import StrictModel


class KafkaBroker(StrictModel):
    brokers: Literal[1, 3] = 1
    partitions: int = Field(1, ge=1)
    replication_factor: int = Field(1, ge=1)
    min_insync_replicas: int = Field(1, ge=1)
    topic: dict[str, Any] = Field(default_factory=dict, description="topic config, verbatim")
    server: dict[str, Any] = Field(default_factory=dict, description="server.properties, verbatim")

    @model_validator(mode="after")
    def _replicas_fit(self) -> KafkaBroker:
        if self.replication_factor > self.brokers:
            raise ValueError(f"replication_factor {self.replication_factor} exceeds brokers {self.brokers}")
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"min_insync_replicas {self.min_insync_replicas} exceeds replication_factor {self.replication_factor}"
            )
        return self


class KafkaClient(StrictModel):
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

    @model_validator(mode="after")
    def _sasl_fits(self) -> KafkaClient:
        if self.sasl_mechanism is not None and self.security not in ("sasl_plaintext", "sasl_ssl"):
            raise ValueError(
                f"client.sasl_mechanism {self.sasl_mechanism!r} needs client.security sasl_plaintext or sasl_ssl "
                f"(is {self.security!r})"
            )
        return self
