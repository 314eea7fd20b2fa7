"""Kafka driver on confluent-kafka (librdkafka).

Producer settings from the matrix (`client.producer`) pass to librdkafka untouched over a few harness
defaults; so do consumer settings. librdkafka delivers delivery reports and messages from `poll()`, so each
producer and consumer gets a small thread that polls continuously: the generator's callbacks then run the
moment librdkafka hands over, not when the event loop next looks. Which broker led a partition when a
message arrived is not the driver's business: the runner attributes it from the cluster's leader timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from ..errors import BrokerError
from .base import AckCallback, MessageCallback

_POLL_S = 0.05
# librdkafka's own defaults stand unless the matrix overrides them (acks=all, linger.ms=5, …); the harness
# only shortens the consumer's fetch wait so an idle fetch does not sit on a new message for 500 ms.
_CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 10}


def topic_for(cell_id: str, route: str = "") -> str:
    return f"sixnines-{cell_id}" + (f"-{route}" if route else "")


class KafkaDriver:
    """Everything a cell does against one Kafka cluster, for one process."""

    def __init__(
        self, bootstrap: str, cell: Any, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        self.bootstrap = bootstrap
        self.client = dict(client or {})  # security settings (TLS, SASL) for every client and admin request
        self.cell = cell
        self.cell_id = cell_id
        self.topic = topic_for(cell_id, route)
        self.acks = True  # librdkafka reports every delivery (with acks=0, as soon as it is written)
        self._producers: list[Producer] = []
        self._consumers: list[Consumer] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- parent side ---------------------------------------------------------------------------
    async def prepare(self) -> None:
        from ..systems.kafka.admin import create_topic

        b = self.cell.broker
        config = {"min.insync.replicas": str(b.min_insync_replicas), **{k: str(v) for k, v in b.topic.items()}}
        await asyncio.to_thread(
            create_topic, self.bootstrap, self.topic, b.partitions, b.replication_factor, config, client=self.client
        )

    async def prefill(self, messages: int, size_bytes: int, progress: Callable[[int], None]) -> None:
        """Write a backlog of `messages` before the cell, as fast as the cluster takes them, for lagging
        consumers to read. Prefill messages carry no sixnines header, so no measured consumer counts them."""

        def fill() -> None:
            producer = Producer({"bootstrap.servers": self.bootstrap, **self.client, "linger.ms": 50, "acks": "all"})
            partitions = self.cell.broker.partitions
            for i in range(messages):
                while True:
                    try:
                        producer.produce(self.topic, prefill_payload(size_bytes), partition=i % partitions)
                        break
                    except BufferError:  # local queue full: let deliveries drain
                        producer.poll(0.1)
                if i % 10_000 == 0:
                    producer.poll(0)
                    progress(i)
            if producer.flush(120) != 0:
                raise BrokerError(f"prefill: {producer.flush(0)} messages still undelivered after 120 s")
            progress(messages)

        await asyncio.to_thread(fill)

    async def cleanup(self) -> None:
        from ..systems.kafka.admin import delete_topic

        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                asyncio.to_thread(delete_topic, self.bootstrap, self.topic, client=self.client), timeout=10
            )

    # -- producers -----------------------------------------------------------------------------
    async def open_producer(self, name: str, connections: int) -> list[Producer]:
        config = {"bootstrap.servers": self.bootstrap, **self.client, "client.id": name, **self.cell.client.producer}
        producer = Producer(config)
        # Connect and fetch the topic's metadata now, not on the first timed send.
        metadata = await asyncio.to_thread(producer.list_topics, self.topic, 10)
        self._partitions = len(metadata.topics[self.topic].partitions)
        self._key_for = self._key_function(name)
        self._producers.append(producer)
        self._spawn(self._poll_producer, producer)
        return [producer]

    def _key_function(self, name: str) -> Callable[[int, int], tuple[bytes | None, int | None]]:
        """(key, explicit partition) for message `seq` of logical producer `stream`, per the key scheme."""
        scheme = self.cell.client.keys
        if scheme == "round_robin":
            return lambda seq, stream: (None, (seq + stream) % self._partitions)
        if scheme == "random":
            return lambda seq, stream: (os.urandom(8), None)
        if scheme == "per_producer":
            keys: dict[int, bytes] = {}
            return lambda seq, stream: (keys.setdefault(stream, f"{name}-{stream}".encode()), None)
        return lambda seq, stream: (None, None)

    async def send(self, conn: Producer, payload: bytes, seq: int, on_ack: AckCallback, stream: int = 0) -> None:
        key, partition = self._key_for(seq, stream)
        report = functools.partial(_delivered, seq, on_ack)
        if partition is None:
            conn.produce(self.topic, payload, key, on_delivery=report)
        else:
            conn.produce(self.topic, payload, key, partition, on_delivery=report)

    async def request(self, conn: Any, payload: bytes, timeout_s: float) -> None:
        raise BrokerError("Kafka has no request/reply; measurement 'rtt' is refused by validation")

    def _poll_producer(self, producer: Producer) -> None:
        while not self._stop.is_set():
            producer.poll(_POLL_S)

    # -- consumers -----------------------------------------------------------------------------
    async def open_consumer(self, name: str, on_message: MessageCallback, lagging: bool = False) -> None:
        client = self.cell.client
        start_from = "beginning" if lagging else client.start_from
        config = {
            "bootstrap.servers": self.bootstrap,
            **self.client,
            "client.id": name,
            "group.id": self.topic + ("-lagging" if lagging else ""),
            "enable.auto.commit": False,
            "auto.offset.reset": "latest" if start_from == "end" else "earliest",
            **_CONSUMER_DEFAULTS,
            **client.consumer,
        }
        consumer = Consumer(config)
        self._consumers.append(consumer)
        assigned = threading.Event()

        def position(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            """Pin the start offsets at assignment time so nothing produced after `ready` is skipped."""
            for tp in partitions:
                if start_from == "end":
                    tp.offset = consumer.get_watermark_offsets(tp, timeout=10)[1]
                else:
                    tp.offset = OFFSET_BEGINNING
            consumer.assign(partitions)
            assigned.set()

        if client.consumer_mode == "group" or lagging:
            consumer.subscribe([self.topic], on_assign=position)
        else:
            index, count = int(name.rsplit("c", 1)[-1]), self.cell.workload.consumers
            mine = [TopicPartition(self.topic, p) for p in range(self.cell.broker.partitions) if p % count == index]
            position(consumer, mine)
        self._spawn(self._consume, consumer, on_message)
        if not await asyncio.to_thread(assigned.wait, 60):
            raise BrokerError(f"{name}: no partition assigned within 60 s")

    def _consume(self, consumer: Consumer, on_message: MessageCallback) -> None:
        while not self._stop.is_set():
            msg = consumer.poll(_POLL_S)  # also drives the group protocol before assignment
            if msg is None or msg.error() is not None:
                continue
            on_message(msg.value(), msg.partition(), msg.offset())

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        raise BrokerError("Kafka has no request/reply responders")

    # -- shared --------------------------------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True, name=f"kafka-{target.__name__}")
        thread.start()
        self._threads.append(thread)

    async def close(self) -> None:
        for producer in self._producers:
            await asyncio.to_thread(producer.flush, 5)
        self._stop.set()
        for thread in self._threads:
            await asyncio.to_thread(thread.join, 5)
        for consumer in self._consumers:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(consumer.close)
        self._producers.clear()
        self._consumers.clear()
        self._threads.clear()


PREFILL_MAGIC = b"P9"  # not the sample magic: decode_header refuses prefill messages


def prefill_payload(size_bytes: int) -> bytes:
    return PREFILL_MAGIC + os.urandom(max(0, size_bytes - len(PREFILL_MAGIC)))


def _delivered(seq: int, on_ack: AckCallback, err: KafkaError | None, msg: Any) -> None:
    if err is not None:
        on_ack(seq, None, None, err.name())
        return
    offset = msg.offset()
    on_ack(seq, msg.partition(), offset if offset is not None and offset >= 0 else None, None)
