"""OMB's NATS driver files in sixnines terms: OMB's NATS driver is JetStream (async publish with acks, a stream per
topic, File storage by default; each subscription a durable consumer delivering to a queue group, every message
acknowledged), as the cell's JetStream mode is."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interop.omb_draft import Draft
from ...interop.omb_topics import note_one_route

DRIVER_CLASSES = ("io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver",)
DRIVER_FIELDS = ("name", "driverClass", "natsHostUrl", "replicationFactor", "storageType", "maxBytes")
_JETSTREAM = "OMB's NATS driver uses JetStream"


class NatsOmb:
    driver_classes = DRIVER_CLASSES
    driver_fields = DRIVER_FIELDS

    def map_partitions(self, partitions: int, draft: Draft) -> None:
        if partitions == 1:
            draft.note("partitionsPerTopic", partitions, "a NATS stream is one ordered log")
        else:
            draft.warn("partitionsPerTopic", partitions, "NATS has no partitions (OMB's NATS driver ignores it too)")

    def map_keys(self, key: str, keys: str, note: str, draft: Draft) -> None:
        if keys == "none":
            draft.note("keyDistributor", key, "NATS messages have no key")
        else:
            draft.warn("keyDistributor", key, "NATS messages have no key")

    def note_subscription(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 1, "one queue group")

    def note_publish_only(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 0, "JetStream publish acks are the measured latency")

    def map_backlog(self, gb: float, messages: int, lagging: int, draft: Draft) -> None:
        draft.refuse("consumerBacklogSizeGB", gb, "a prefilled backlog with lagging consumers is a Kafka cell feature")

    def map_driver(self, driver: Mapping[str, Any], draft: Draft) -> None:
        draft.put("driver.driverClass", driver["driverClass"], "broker.mode", "jetstream", _JETSTREAM)
        if (url := draft.given(driver, "natsHostUrl", "")) is not None:
            draft.address("driver.natsHostUrl", url, "nats-server")
        storage = str(driver.get("storageType", "File"))
        if storage.lower() not in ("file", "memory"):
            draft.refuse("driver.storageType", storage, "File or Memory")
        else:
            draft.put("driver.storageType", storage, "broker.storage", storage.lower(), "OMB's default is File")
        replicas = driver.get("replicationFactor", 1)
        if replicas not in (1, 3):
            draft.refuse("driver.replicationFactor", replicas, "sixnines runs R1 (one server) or R3 (a 3-node cluster)")
        else:
            draft.put("driver.replicationFactor", replicas, "broker.replicas", replicas)
            draft.put("driver.replicationFactor", replicas, "broker.servers", replicas, "servers to hold the replicas")
        max_bytes = driver.get("maxBytes", -1)
        if max_bytes not in (-1, None):
            draft.warn(
                "driver.maxBytes", max_bytes, "no equivalent: sixnines streams are unlimited for a cell's length"
            )

    def without_driver(self, draft: Draft) -> None:
        draft.put("(no driver file)", None, "broker.mode", "jetstream", _JETSTREAM)

    def map_other_topics(self, others: int, partitions: int, subscriptions: int, draft: Draft) -> None:
        note_one_route(others, partitions, "stream", draft)
