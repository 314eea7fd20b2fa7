"""Apache Kafka: KRaft clusters from Maven Central's jars, confluent-kafka (librdkafka) clients."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..base import System
from .settings import KafkaCell

# Producer options that most change latency, shown in a cell's label when a matrix sets them.
LABELLED_PRODUCER_OPTIONS = ("linger.ms", "batch.size", "compression.type", "enable.idempotence")


class Kafka(System):
    name: ClassVar[str] = "kafka"
    cell_model = KafkaCell
    setup_estimate_s = 20.0  # a JVM per node, KRaft formatting and election
    calibration_broker: ClassVar[Mapping[str, Any]] = {"brokers": 1}

    def label(self, spec: Any) -> str:
        b, c = spec.broker, spec.client
        acks = c.producer.get("acks", "all")  # librdkafka's default
        isr = f" min.isr={b.min_insync_replicas}" if b.min_insync_replicas > 1 else ""
        setup = f"kafka b{b.brokers} p{b.partitions} rf{b.replication_factor}{isr} acks={acks}"
        setup += "".join(f" {k}={v}" for k, v in c.producer.items() if k in LABELLED_PRODUCER_OPTIONS)
        setup += "" if c.keys == "none" else f" keys={c.keys}"
        if c.security is not None:
            setup += f" {c.security}" + (f"/{c.sasl_mechanism}" if c.sasl_mechanism else "")
        return setup

    def group_tag(self, spec: Any) -> str:
        return f"b{spec.broker.brokers}"


KAFKA = Kafka()
