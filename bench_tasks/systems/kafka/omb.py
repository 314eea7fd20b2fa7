"""OMB's Kafka driver files in sixnines terms: replication factor, topic config, and the Java client properties
translated to librdkafka's (`omb_props`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interop.omb_draft import Draft, shown
from ...interop.omb_topics import path
from ...secrecy import is_secret
from .omb_props import Role, parse_properties, translate

DRIVER_CLASSES = ("io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver",)
# KRaft refuses to create more partitions than this in one request ("Excessively large number of partitions per
# request", KAFKA-17870), and the harness creates a topic per request: the background topic's partitions stop here.
MAX_TOPIC_PARTITIONS = 10_000
DRIVER_FIELDS = (
    "name",
    "driverClass",
    "replicationFactor",
    "topicConfig",
    "commonConfig",
    "producerConfig",
    "consumerConfig",
)


class KafkaOmb:
    driver_classes = DRIVER_CLASSES
    driver_fields = DRIVER_FIELDS

    def map_partitions(self, partitions: int, draft: Draft) -> None:
        draft.put("partitionsPerTopic", partitions, "broker.partitions", partitions)

    def map_keys(self, key: str, keys: str, note: str, draft: Draft) -> None:
        draft.put("keyDistributor", key, "client.keys", keys, note or "no key: librdkafka's sticky partitioner")

    def note_subscription(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 1, "one consumer group")

    def note_publish_only(self, draft: Draft) -> None:
        """Kafka's publish latency is the delivery report's: nothing to add."""

    def map_backlog(self, gb: float, messages: int, lagging: int, draft: Draft) -> None:
        draft.put("consumerBacklogSizeGB", gb, "workload.prefill_messages", messages, f"{gb} GiB / messageSize")
        draft.put(
            "consumerBacklogSizeGB",
            gb,
            "workload.lagging_consumers",
            lagging,
            "OMB stops its consumers until the backlog is built and then lets the measured consumers drain it; "
            "here as many unmeasured consumers as the subscription has read the backlog from its oldest message "
            "while the measured ones read live messages, so the latency is the live stream's under backlog reads",
        )

    def map_driver(self, driver: Mapping[str, Any], draft: Draft) -> None:
        rf = driver.get("replicationFactor", 1)
        if rf not in (1, 2, 3):
            draft.refuse("driver.replicationFactor", rf, "a provisioned Kafka cluster has 1 or 3 brokers: 1 to 3")
            return
        draft.put("driver.replicationFactor", rf, "broker.replication_factor", rf)
        draft.put("driver.replicationFactor", rf, "broker.brokers", 1 if rf == 1 else 3, "brokers to hold the replicas")
        for key, role in (("commonConfig", None), ("producerConfig", "producer"), ("consumerConfig", "consumer")):
            for name, value in _properties(driver, key, draft).items():
                _map_client_property(f"driver.{key}.{name}", name, value, role, draft)
        for name, value in _properties(driver, "topicConfig", draft).items():
            omb = f"driver.topicConfig.{name}"
            if name == "min.insync.replicas":
                draft.put(omb, value, "broker.min_insync_replicas", int(value), "modelled by the harness")
            else:
                draft.put(omb, value, f"broker.topic.{name}", value, "topic config, verbatim")

    def without_driver(self, draft: Draft) -> None:
        draft.note("(no driver file)", None, "Kafka defaults: 1 broker, replication factor 1, librdkafka defaults")

    def map_other_topics(self, others: int, partitions: int, subscriptions: int, draft: Draft) -> None:
        """The other topics' partitions in one background topic, laid out and configured as the measured one
        (OMB creates every topic alike), its producers keyed and configured as the measured producers, read by a
        consumer group per OMB subscription."""
        wanted = others * partitions
        kept = min(wanted, MAX_TOPIC_PARTITIONS)
        why = (
            f"the other {others} topics' partitions, partitionsPerTopic {partitions} each, in one background topic: a "
            "broker serves partitions (logs, leaders, replica fetches); what is per topic only (metadata, the "
            "controller's topic count) is not reproduced"
        )
        if kept < wanted:
            draft.warn(
                "topics",
                others + 1,
                f"the other topics hold {wanted:,} partitions; the background topic has {kept:,}, the most KRaft "
                "creates in one request (it refuses more: KAFKA-17870), so the brokers serve "
                f"{kept + draft.broker.get('partitions', 1):,} partitions, not OMB's {wanted + partitions:,}",
            )
        draft.put("partitionsPerTopic", partitions, path("partitions"), kept, why)
        draft.put("keyDistributor", None, path("keys"), draft.client.get("keys"), "as the measured producers")
        rf = draft.broker.get("replication_factor", 1)
        draft.put("driver.replicationFactor", rf, path("replication_factor"), rf, "as the measured topic")
        topic = dict(draft.broker.get("topic", {}))
        if draft.broker.get("min_insync_replicas", 1) > 1:
            topic["min.insync.replicas"] = draft.broker["min_insync_replicas"]
        if topic:
            draft.put("driver.topicConfig", "…", path("topic"), topic, "the measured topic's config")
        if subscriptions > 1:
            draft.put(
                "subscriptionsPerTopic",
                subscriptions,
                path("subscriptions"),
                subscriptions,
                "a consumer group per subscription, each reading every message of the other topics",
            )
        if producer := draft.client.get("producer"):
            draft.put("driver.producerConfig", "…", path("producer"), dict(producer), "the measured producers' config")


def _map_client_property(omb: str, name: str, value: Any, role: Role | None, draft: Draft) -> None:
    """commonConfig applies to producers and consumers both; security settings are the client's own axes."""
    if name == "security.protocol":
        draft.put(omb, value, "client.security", str(value).lower())
        return
    if name == "sasl.mechanism":
        draft.put(omb, value, "client.sasl_mechanism", str(value).upper())
        return
    if is_secret(name):  # whatever the rules say of it: a matrix file never holds a credential
        draft.warn(omb, value, "a secret: credentials come from the cell's connection (brokers: external)")
        return
    roles: tuple[Role, ...] = (role,) if role else ("producer", "consumer")
    try:
        translated = [(r, translate(name, value, r)) for r in roles]
    except ValueError as exc:
        draft.refuse(omb, value, str(exc))
        return
    if all(t.target is None for _, t in translated):  # one warning, not one per role
        draft.warn(omb, value, translated[0][1].note)
        return
    for r, t in translated:
        if t.target is None:
            draft.warn(omb, value, f"{r}s: {t.note}")
            continue
        draft.put(omb, value, f"client.{r}.{t.target}", t.value, t.note)
        if t.warning:
            draft.warnings.append(f"{draft.where(omb)}: {shown(omb, value)!r} — {t.note}")


def _properties(driver: Mapping[str, Any], key: str, draft: Draft) -> dict[str, Any]:
    text = driver.get(key)
    if not text:
        return {}
    try:
        return parse_properties(str(text))
    except ValueError as exc:
        draft.refuse(f"driver.{key}", "…", str(exc))
        return {}
