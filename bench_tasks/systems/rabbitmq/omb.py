"""OMB's RabbitMQ driver files in sixnines terms.

OMB's RabbitMQ driver (`RabbitMqBenchmarkDriver`) publishes with publisher confirms to a durable fanout exchange per
topic; each subscription is a durable queue of the file's `queueType` bound to that exchange, whose consumers share
it and auto-acknowledge (`basicConsume` with autoAck). `messagePersistence` sends messages with delivery mode 2.
A topic has one partition (the driver refuses more), and `amqpUris` lists the nodes it connects to, a login
possibly written into each. The cell does the same with the harness's own nodes: exchange `fanout`, confirms,
`acks: auto`, the queue type, durable, persistent as the file says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interop.omb_draft import Draft
from ...interop.omb_topics import note_one_route

DRIVER_CLASSES = ("io.openmessaging.benchmark.driver.rabbitmq.RabbitMqBenchmarkDriver",)
PACING = ("producerCreationDelay", "producerCreationBatchSize", "consumerCreationDelay", "consumerCreationBatchSize")
DRIVER_FIELDS = ("name", "driverClass", "amqpUris", "messagePersistence", "queueType", *PACING)
QUEUE_TYPES = {"CLASSIC": "classic", "QUORUM": "quorum", "STREAM": "stream"}  # OMB's QueueType → x-queue-type
_ALWAYS = "(OMB's RabbitMQ driver)"  # the account's name for what the driver does whatever its file says


class RabbitmqOmb:
    driver_classes = DRIVER_CLASSES
    driver_fields = DRIVER_FIELDS

    def map_partitions(self, partitions: int, draft: Draft) -> None:
        if partitions == 1:
            draft.note("partitionsPerTopic", partitions, "one queue per subscription behind the topic's exchange")
        else:
            draft.refuse(
                "partitionsPerTopic",
                partitions,
                "OMB's RabbitMQ driver refuses a topic of more than one partition (\"Cannot create topic with "
                'partitions in RabbitMQ"); import the workload with partitionsPerTopic: 1',
            )

    def map_keys(self, key: str, keys: str, note: str, draft: Draft) -> None:
        draft.note("keyDistributor", key, "OMB sends the key as the routing key of a fanout exchange, which ignores it")

    def note_subscription(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 1, "one durable queue bound to the exchange; its consumers share it")

    def note_publish_only(self, draft: Draft) -> None:
        draft.warn(
            "subscriptionsPerTopic",
            0,
            "OMB declares no queue without a subscription, so its exchange drops every message (and confirms it "
            "as unroutable); the sixnines cell's queue keeps them",
        )

    def map_backlog(self, gb: float, messages: int, lagging: int, draft: Draft) -> None:
        draft.refuse(
            "consumerBacklogSizeGB", gb, "a prefilled backlog with lagging consumers is not built for RabbitMQ cells"
        )

    def map_driver(self, driver: Mapping[str, Any], draft: Draft) -> None:
        _as_omb_does(draft)
        _map_nodes(driver, draft)
        _map_queue(driver, draft)
        for name in PACING:
            if (value := draft.given(driver, name, 0)) is not None:
                draft.note(
                    f"driver.{name}",
                    value,
                    "OMB paces creating many clients; sixnines starts every client before the warm-up, so this "
                    "changes nothing measured",
                )

    def without_driver(self, draft: Draft) -> None:
        _as_omb_does(draft)
        draft.put("(no driver file)", None, "broker.nodes", 1, "one node")
        _map_queue({}, draft)

    def map_other_topics(self, others: int, partitions: int, subscriptions: int, draft: Draft) -> None:
        note_one_route(others, partitions, "queue", draft)


def _as_omb_does(draft: Draft) -> None:
    """What OMB's RabbitMQ driver does whatever its file says."""
    draft.put(_ALWAYS, None, "broker.exchange", "fanout", "it publishes to a durable fanout exchange per topic")
    draft.put(_ALWAYS, None, "client.confirms", True, "its producers wait for publisher confirms")
    draft.put(_ALWAYS, None, "client.acks", "auto", "its consumers auto-acknowledge (basicConsume autoAck)")


def _map_nodes(driver: Mapping[str, Any], draft: Draft) -> None:
    """The addresses OMB connects to say how many nodes there are; the harness provisions that many (1 or 3)."""
    uris = draft.given(driver, "amqpUris", [])
    if uris is None:
        draft.put("driver.amqpUris", None, "broker.nodes", 1, "no address given: one node")
        return
    draft.address("driver.amqpUris", uris, "the RabbitMQ nodes")
    nodes = 1 if len(uris) <= 1 else 3
    draft.put("driver.amqpUris", f"{len(uris)} address(es)", "broker.nodes", nodes, "a node per address")
    if len(uris) not in (0, 1, 3):
        draft.warn(
            "driver.amqpUris",
            f"{len(uris)} addresses",
            "sixnines provisions one node or a 3-node cluster: this is a cluster of 3",
        )


def _map_queue(driver: Mapping[str, Any], draft: Draft) -> None:
    """The subscription's queue: its type, and (classic) durable with messages persistent as the file says."""
    raw = driver.get("queueType", "CLASSIC")
    queue_type = QUEUE_TYPES.get(raw.upper()) if isinstance(raw, str) else None
    default = "" if "queueType" in driver else " (OMB's default)"
    if queue_type is None:
        draft.refuse("driver.queueType", raw, f"one of {', '.join(QUEUE_TYPES)}")
        return
    if queue_type == "stream":
        draft.refuse(
            "driver.queueType",
            raw,
            "RabbitMQ refuses a stream consumer that auto-acknowledges without a prefetch, which is what OMB's "
            "driver declares; write a stream cell by hand (client.acks: manual, client.prefetch)",
        )
        return
    draft.put("driver.queueType", raw, "broker.queue_type", queue_type, "x-queue-type" + default)
    persistent = draft.given(driver, "messagePersistence", False)
    if queue_type == "quorum":
        if persistent is not None:
            draft.note("driver.messagePersistence", persistent, "a quorum queue writes every message to disk anyway")
        return
    draft.put("driver.queueType", raw, "broker.durable", True, "OMB declares its queues durable")
    value = False if persistent is None else persistent
    default = "" if persistent is not None else " (OMB's default)"
    draft.put("driver.messagePersistence", value, "broker.persistent", value, "delivery mode 2" + default)
