"""Kafka driver on confluent-kafka (librdkafka).

Producer settings from the matrix (`client.producer`) pass to librdkafka untouched over a few harness
defaults; so do consumer settings. librdkafka delivers delivery reports and messages from `poll()`, so each
producer and consumer gets a small thread that polls continuously: the generator's callbacks then run the
moment librdkafka hands over, not when the event loop next looks. A consumer thread takes everything
librdkafka has already fetched in one call (`consume` without waiting, after a `poll` that waits for the
first message), so a busy consumer costs one Python call per batch, not per message. librdkafka's own
statistics say how much waits for the harness (fetch queue, unserved delivery reports). Which broker led a
partition when a message arrived is not the driver's business: the runner attributes it from the
cluster's leader timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from ...load.loop import name_thread
from ...spec.leader import leader_node

_POLL_S = 0.05
# librdkafka's own defaults stand unless the matrix overrides them (acks=all, linger.ms=5, …); the harness
# only shortens the consumer's fetch wait so an idle fetch does not sit on a new message for 500 ms.
_CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 10}
# How often librdkafka reports its queues (the backlog the harness watches); a matrix may set its own.
_STATS: dict[str, Any] = {"statistics.interval.ms": 250}
_CONSUME_BATCH = 4096  # at most this many messages per hand-over
# OS names of the driver's threads; the `py-` prefix marks threads that run Python (saturation.py).
_THREAD_NAMES = {"_poll_producer": "py-kafka-poll", "_consume": "py-kafka-recv"}


def topic_for(cell_id: str, route: str = "") -> str:
    return f"sixnines-{cell_id}" + (f"-{route}" if route else "")


class KafkaDriver:
    """Everything a cell does against one Kafka cluster, for one process."""

    # Messages pass the driver's poll and consume threads and librdkafka's broker threads; the event loop
    # only sends and reports.
    message_threads = ("py-kafka-", "rdk:broker")

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
        self._stats = _Statistics()
        self.errors = ClientErrors()

    # -- parent side ---------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Create the route's topic; with `broker.leader`, node N first in every partition's replica list, and
        partition 0 verified to be led by N before anything is sent (`placement`)."""
        from .admin import create_topic
        from .placement import ensure_leader, leader_assignment

        b = self.cell.broker
        config = {"min.insync.replicas": str(b.min_insync_replicas), **{k: str(v) for k, v in b.topic.items()}}
        leader = leader_node(b.leader)
        assignment = None
        if leader is not None:
            assignment = leader_assignment(b.brokers, b.partitions, b.replication_factor, leader)
        await asyncio.to_thread(
            create_topic,
            self.bootstrap,
            self.topic,
            b.partitions,
            b.replication_factor,
            config,
            client=self.client,
            assignment=assignment,
        )
        if leader is not None:
            await asyncio.to_thread(ensure_leader, self.bootstrap, self.topic, leader, self.client)

    async def prefill(self, messages: int, size_bytes: int, progress: Callable[[int], None]) -> None:
        """Write a backlog of `messages` before the cell, as fast as the cluster takes them, for lagging
        consumers to read. Prefill messages carry no sixnines header, so no measured consumer counts them.
        A cluster that stops taking them, or refuses any, is an error saying how far the backlog got."""
        config = {"bootstrap.servers": self.bootstrap, **self.client, "linger.ms": 50, "acks": "all"}
        prefill = _Prefill(config, self.topic, self.cell.broker.partitions)
        await asyncio.to_thread(prefill.fill, messages, size_bytes, progress)

    async def cleanup(self) -> None:
        from .admin import delete_topic

        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                asyncio.to_thread(delete_topic, self.bootstrap, self.topic, client=self.client), timeout=10
            )

    # -- producers -----------------------------------------------------------------------------
    async def open_producer(self, name: str, connections: int) -> list[Producer]:
        config = {
            "bootstrap.servers": self.bootstrap,
            **self.client,
            "client.id": name,
            **_STATS,
            **self.cell.client.producer,
            "stats_cb": self._stats.update,
            "error_cb": self._client_error,
        }
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

    async def send_batch(self, conn: Producer, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """`produce` each message as it is pulled; librdkafka batches them on the wire by its own settings."""
        produce, topic, key_for, partial = conn.produce, self.topic, self._key_for, functools.partial
        refused: dict[int, str] = {}
        for seq, stream, payload in messages:
            key, partition = key_for(seq, stream)
            report = partial(_delivered, seq, on_ack)
            try:
                if partition is None:
                    produce(topic, payload, key, on_delivery=report)
                else:
                    produce(topic, payload, key, partition, on_delivery=report)
            except (BufferError, KafkaException) as exc:  # local queue full, or refused outright
                refused[seq] = type(exc).__name__
        return refused

    async def request(self, conn: Any, payload: bytes, timeout_s: float) -> None:
        raise BrokerError("Kafka has no request/reply; measurement 'rtt' is refused by validation")

    def _poll_producer(self, producer: Producer) -> None:
        """Delivery reports (and statistics) are served here, the moment librdkafka has them."""
        while not self._stop.is_set():
            producer.poll(_POLL_S)

    # -- consumers -----------------------------------------------------------------------------
    async def open_consumer(
        self, name: str, on_messages: MessagesCallback, lagging: bool = False, subscription: int = 0
    ) -> None:
        client = self.cell.client
        start_from = "beginning" if lagging else client.start_from
        group = self.topic + ("-lagging" if lagging else "") + (f"-s{subscription}" if subscription else "")
        config = {
            "bootstrap.servers": self.bootstrap,
            **self.client,
            "client.id": name,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "latest" if start_from == "end" else "earliest",
            **_CONSUMER_DEFAULTS,
            **_STATS,
            **client.consumer,
            "stats_cb": self._stats.update,
            "error_cb": self._client_error,
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
            from .admin import await_group_coordinator  # a first join meets a coordinator that answers

            await asyncio.to_thread(await_group_coordinator, self.bootstrap, config["group.id"], client=self.client)
            consumer.subscribe([self.topic], on_assign=position)
        else:
            index, count = int(name.rsplit("c", 1)[-1]), self.cell.workload.consumers
            mine = [TopicPartition(self.topic, p) for p in range(self.cell.broker.partitions) if p % count == index]
            position(consumer, mine)
        self._spawn(self._consume, consumer, on_messages)
        if not await asyncio.to_thread(assigned.wait, 60):
            raise BrokerError(f"{name}: no partition assigned within 60 s")

    def _consume(self, consumer: Consumer, on_messages: MessagesCallback) -> None:
        """Wait for the first message (`poll` also drives the group protocol before assignment), then take
        whatever else librdkafka already holds in one `consume` call that does not wait: a batch when
        messages queue up, one message at a time when they do not, and never a wait for a batch to fill."""
        poll, consume = consumer.poll, consumer.consume
        while not self._stop.is_set():
            first = poll(_POLL_S)
            if first is None:
                continue
            rest = consume(_CONSUME_BATCH, 0)
            on_messages(_Batch([first, *rest] if rest else [first], self.errors))

    def _client_error(self, err: KafkaError) -> None:
        """librdkafka's errors that belong to no message (a broker down, a refused login), from its poll."""
        self.errors.error(err.name(), err.str())

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        raise BrokerError("Kafka has no request/reply responders")

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """librdkafka reads the network in its own threads and says nothing of it; receipts are stamped when
        it hands messages over, and its fetch queue (`backlog`) shows what waited for the harness."""

    def backlog(self) -> int | None:
        """From librdkafka's latest statistics: consumers, messages fetched and waiting in the fetch queues for
        the harness to take (`fetchq_cnt`); producers, delivery reports waiting to be served (`replyq`)."""
        return self._stats.backlog()

    # -- shared --------------------------------------------------------------------------------
    def _spawn(self, target: Callable[..., None], *args: Any) -> None:
        name = _THREAD_NAMES[target.__name__]

        def run() -> None:
            name_thread(name)  # shown by top -H; the harness's CPU facts are per thread name
            target(*args)

        thread = threading.Thread(target=run, daemon=True, name=name)
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


PREFILL_STALL_S = 60.0  # librdkafka's queue full this long without a delivery: the cluster is not taking writes
PREFILL_FLUSH_S = 120.0


class _Prefill:
    """One prefill producer: every delivery counted, the first refusal kept, and a deadline on a full queue."""

    def __init__(self, config: dict[str, Any], topic: str, partitions: int):
        self.producer = Producer(config)
        self.address, self.topic, self.partitions = config["bootstrap.servers"], topic, partitions
        self.delivered = self.failed = 0
        self.first_error: str | None = None

    def _report(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.delivered += 1
            return
        self.failed += 1
        self.first_error = self.first_error or str(err)

    def fill(self, messages: int, size_bytes: int, progress: Callable[[int], None]) -> None:
        try:
            self._fill(messages, size_bytes, progress)
        finally:  # nothing of a failed prefill lives on: queued messages purged, the client let go
            self.producer.purge()
            del self.producer

    def _fill(self, messages: int, size_bytes: int, progress: Callable[[int], None]) -> None:
        payload = prefill_payload(size_bytes)
        for i in range(messages):
            self._produce(payload, i % self.partitions, messages)
            if i % 10_000 == 0:
                self.producer.poll(0)
                progress(i)
        undelivered = self.producer.flush(PREFILL_FLUSH_S)
        if undelivered or self.failed:
            raise BrokerError(
                f"prefill of {self.topic}: {self.delivered} of {messages} messages written, {self.failed} refused, "
                f"{undelivered} still undelivered after {PREFILL_FLUSH_S:g} s{self._first()}"
            )
        progress(messages)

    def _produce(self, payload: bytes, partition: int, messages: int) -> None:
        """Produce one message, waiting while librdkafka's queue is full, but not for ever: each delivery
        (or refusal) starts a new grace period."""
        seen, deadline = self.delivered + self.failed, time.monotonic() + PREFILL_STALL_S
        while True:
            try:
                self.producer.produce(self.topic, payload, partition=partition, on_delivery=self._report)
                return
            except BufferError:  # local queue full: let deliveries drain
                self.producer.poll(0.1)
            if self.delivered + self.failed > seen:
                seen, deadline = self.delivered + self.failed, time.monotonic() + PREFILL_STALL_S
            elif time.monotonic() > deadline:
                raise BrokerError(
                    f"prefill of {self.topic}: librdkafka's queue stayed full for {PREFILL_STALL_S:g} s without a "
                    f"delivery, {self.delivered} of {messages} messages written: the cluster at {self.address} is "
                    f"not taking writes{self._first()}"
                )

    def _first(self) -> str:
        return f" (first refusal: {self.first_error})" if self.first_error else ""


class _Batch:
    """What one poll/consume returned, read only after the generator has stamped it; error events (which
    carry no message) are counted in the driver's `errors` and left out."""

    __slots__ = ("_errors", "_messages")

    def __init__(self, messages: list[Message], errors: ClientErrors):
        self._messages = messages
        self._errors: ClientErrors | None = errors  # None once the error events were counted and left out

    def _good(self) -> list[Message]:
        if self._errors is not None:
            errors, self._errors = self._errors, None
            if any(m.error() is not None for m in self._messages):
                for err in (m.error() for m in self._messages if m.error() is not None):
                    errors.error(err.name(), err.str())
                self._messages = [m for m in self._messages if m.error() is None]
        return self._messages

    def payloads(self) -> list[bytes]:
        return [m.value() for m in self._good()]

    def partitions(self) -> list[int]:
        return [m.partition() for m in self._good()]

    def offsets(self) -> list[int]:
        return [m.offset() for m in self._good()]


class _Statistics:
    """The latest of librdkafka's statistics (JSON, every `statistics.interval.ms`), reduced to the backlog."""

    def __init__(self) -> None:
        self._backlog: int | None = None

    def update(self, text: str) -> None:
        stats = json.loads(text)
        if stats.get("type") == "producer":
            self._backlog = int(stats.get("replyq", 0))
            return
        self._backlog = sum(
            max(0, int(p.get("fetchq_cnt", 0)))
            for topic in stats.get("topics", {}).values()
            for p in topic.get("partitions", {}).values()
            if _fetching(p)
        )

    def backlog(self) -> int | None:
        return self._backlog


def _fetching(partition: Mapping[str, Any]) -> bool:
    """A partition this consumer is fetching: assigned (`desired`) and active. A partition it lost in a
    rebalance, or librdkafka's internal -1, can keep a stale count that nobody will take: counted, it made an
    idle group member (more consumers than partitions) look saturated at 0 msg/s."""
    return (
        partition.get("partition", 0) != -1
        and partition.get("desired", True)
        and (partition.get("fetch_state", "active") == "active")
    )


PREFILL_MAGIC = b"P9"  # not the sample magic: decode_header refuses prefill messages


def prefill_payload(size_bytes: int) -> bytes:
    return PREFILL_MAGIC + os.urandom(max(0, size_bytes - len(PREFILL_MAGIC)))


def _delivered(seq: int, on_ack: AckCallback, err: KafkaError | None, msg: Any) -> None:
    if err is not None:
        on_ack(seq, None, None, err.name())
        return
    offset = msg.offset()
    on_ack(seq, msg.partition(), offset if offset is not None and offset >= 0 else None, None)
