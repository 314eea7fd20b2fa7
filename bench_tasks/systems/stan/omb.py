"""OMB's NATS Streaming driver files in sixnines terms.

OMB's NATS Streaming driver (`NatsStreamingBenchmarkDriver`) publishes with PubAcks on one streaming connection
(at most `maxPubAcksInFlight` awaiting their ack) and subscribes each subscription as a queue group, not durable,
from new messages on, the client acknowledging each delivery (at most `maxInFlight` unacknowledged). The file holds
the server's address and cluster id; the store is the server's, which OMB's deployment runs on file, fsync on
(its `deploy/templates/cluster.conf`). The cell is the same: a queue group, new messages only, the file store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interop.omb_draft import Draft
from ...interop.omb_topics import note_one_route

DRIVER_CLASSES = ("io.openmessaging.benchmark.driver.natsStreaming.NatsStreamingBenchmarkDriver",)
DRIVER_FIELDS = ("name", "driverClass", "natsHostUrl", "clusterId", "maxPubAcksInFlight", "maxInFlight")
# The file's flow-control fields and the client settings they are (OMB's defaults are sixnines' too).
FLOW = {"maxPubAcksInFlight": "client.max_pub_acks_in_flight", "maxInFlight": "client.max_in_flight"}
_ALWAYS = "(OMB's NATS Streaming driver)"  # the account's name for what the driver does whatever its file says


class StanOmb:
    driver_classes = DRIVER_CLASSES
    driver_fields = DRIVER_FIELDS

    def map_partitions(self, partitions: int, draft: Draft) -> None:
        if partitions == 1:
            draft.note("partitionsPerTopic", partitions, "a channel is one ordered log")
        else:
            draft.warn("partitionsPerTopic", partitions, "a channel has no partitions (OMB's driver ignores it too)")

    def map_keys(self, key: str, keys: str, note: str, draft: Draft) -> None:
        if keys == "none":
            draft.note("keyDistributor", key, "NATS Streaming messages have no key")
        else:
            draft.warn("keyDistributor", key, "NATS Streaming messages have no key (OMB's driver drops it too)")

    def note_subscription(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 1, "one queue group, not durable, from new messages on")

    def note_publish_only(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 0, "the PubAck is the measured acknowledgement")

    def map_backlog(self, gb: float, messages: int, lagging: int, draft: Draft) -> None:
        draft.refuse(
            "consumerBacklogSizeGB", gb, "a prefilled backlog with lagging consumers is not built for NATS Streaming"
        )

    def map_driver(self, driver: Mapping[str, Any], draft: Draft) -> None:
        _as_omb_does(draft)
        if (url := draft.given(driver, "natsHostUrl", "")) is not None:
            draft.address("driver.natsHostUrl", url, "the NATS Streaming server")
        if (cluster := draft.given(driver, "clusterId", "")) is not None:
            draft.note(
                "driver.clusterId",
                cluster,
                "the harness gives each cell's server a cluster id of its own (external: broker.cluster_id)",
            )
        for name, path in FLOW.items():
            if (value := draft.given(driver, name, 0)) is not None:
                if value < 1:
                    draft.refuse(f"driver.{name}", value, "at least 1")
                else:
                    draft.put(f"driver.{name}", value, path, value)

    def without_driver(self, draft: Draft) -> None:
        _as_omb_does(draft)

    def map_other_topics(self, others: int, partitions: int, subscriptions: int, draft: Draft) -> None:
        note_one_route(others, partitions, "channel", draft)


def _as_omb_does(draft: Draft) -> None:
    """What OMB's driver and its deployment do whatever the file says."""
    draft.put(
        _ALWAYS,
        None,
        "broker.store",
        "file",
        "not in the driver file: OMB's deployment runs the file store, fsync on (the server's default); it "
        "clusters three servers, where a cell runs one",
    )
    draft.put(_ALWAYS, None, "client.durable", False, "its subscriptions are not durable")
    draft.put(_ALWAYS, None, "client.start_position", "new_only", "they start from new messages")
