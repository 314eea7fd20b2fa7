"""Apache Kafka: KRaft clusters from Maven Central's jars; confluent-kafka (librdkafka) clients in the Python workers,
or Kafka's own Java client in the JVM worker (`client.library: java`, `jvm_client.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .modes import LAST_NODE_GRACE_S, mode_of
from .settings import KafkaBroker, KafkaCell, KafkaClient

# Producer options that most change latency, shown in a cell's label when a matrix sets them.
LABELLED_PRODUCER_OPTIONS = ("linger.ms", "batch.size", "compression.type", "enable.idempotence")


class Kafka(System):
    name: ClassVar[str] = "kafka"
    cell_model = KafkaCell
    setup_estimate_s = 20.0  # a JVM per node, KRaft formatting and election
    calibration_broker: ClassVar[Mapping[str, Any]] = {"brokers": 1}
    client_libraries = ("confluent-kafka",)
    # restart: the node's command again, same config and data; partition, bandwidth: on a node's own link (each node
    # in a network namespace of its own, listening and voting in the KRaft quorum on its own address)
    fault_actions = frozenset({"stall", "kill", "restart", "partition", "bandwidth"})
    node_hosts = True
    fault_targets = frozenset({"leader", "follower", "controller", "node", "random"})
    last_node_grace_s = LAST_NODE_GRACE_S  # modes.py says why

    @staticmethod
    def leader_refusal(broker: Any) -> str | None:
        """Any cell can: the topic is created with node N first in every partition's replica list (admin)."""
        return None

    @staticmethod
    def fault_nodes(broker: Any) -> list[int]:
        """Kafka's node.id: 1..brokers."""
        return list(range(1, broker.brokers + 1))

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

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """Only a matrix that asks for acks=all (or -1) is held to no loss of an acknowledged message: a
        leader's ack alone (acks=1) may be lost with the leader."""
        producer = (spec.get("client") or {}).get("producer") or {}
        return str(producer.get("acks", "")).lower() in ("all", "-1")

    def promises_no_acknowledged_loss(self, spec: Mapping[str, Any]) -> bool:
        """acks=all on a topic of three replicas or more that accepts a write only with two in sync
        (min.insync.replicas, the topic config's own value first, as the driver creates the topic), and no
        unclean leader election (which may elect a replica that lacks acknowledged messages)."""
        broker = spec.get("broker") or {}
        topic, server = broker.get("topic") or {}, broker.get("server") or {}
        min_isr = int(topic.get("min.insync.replicas", broker.get("min_insync_replicas", 1)))
        unclean = {str(c.get("unclean.leader.election.enable", "false")).lower() for c in (topic, server)}
        return (
            self.delivery_guaranteed(spec)
            and int(broker.get("replication_factor", 1)) >= 3
            and min_isr >= 2
            and unclean == {"false"}
        )

    def group_tag(self, spec: Any) -> str:
        return f"b{spec.broker.brokers}"

    def fetch_release(self, version: str) -> Path:
        from .release import kafka_classpath

        return kafka_classpath(version)

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import KafkaDriver

        return KafkaDriver(address, spec, names, route, client)

    def worker_program(self, spec: Any, role: str) -> Any:
        """The JVM worker on the cell's release's Java client when `client.library` is java (an external cluster's
        cells: the newest release's client), else the Python worker."""
        from ...spec.cell import EXTERNAL_VERSION
        from .jvm_client import worker_program
        from .release import newest_release

        version = newest_release() if spec.version == EXTERNAL_VERSION else spec.version
        return worker_program(spec, role, version)

    def background_spec(self, spec: Any, background: Any) -> Any:
        """A background topic has its own layout and config, producer config and keys."""
        broker = spec.broker.model_copy(
            update={
                "partitions": background.partitions,
                "replication_factor": background.replication_factor,
                "min_insync_replicas": 1,
                "topic": background.topic,
                "leader": None,  # a background topic is where the cluster puts it
            }
        )
        client = spec.client.model_copy(
            update={
                "producer": background.producer,
                "keys": background.keys,
                "consumer_mode": "group",
                "start_from": "end",
            }
        )
        return spec.model_copy(update={"broker": broker, "client": client})

    def omb_driver(self) -> Any:
        from .omb import KafkaOmb

        return KafkaOmb()

    def leader_ref(self, spec: Any, names: str) -> dict[str, Any] | None:
        from .provision import measured_topic

        return {"topic": measured_topic(spec, names)}


KAFKA = Kafka()

# public name -> module of this package, imported on first use (`systems/exports.py` says why): the topic admin
# (confluent-kafka), and the kafka-tools release with Kafka's own perf tools and their output read (`native.py`)
_LAZY = {
    "create_topic": "admin",
    "KafkaCluster": "cluster",
    "newest_release": "release",
    "tools_classpath": "release",
    **dict.fromkeys(
        (
            "END_TO_END_LATENCY",
            "PRODUCER_PERFORMANCE",
            "kafka_tool",
            "parse_end_to_end_latency",
            "parse_producer_performance",
        ),
        "native",
    ),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["KAFKA", "Kafka", "KafkaBroker", "KafkaCell", "KafkaClient", "mode_of", *_LAZY]
