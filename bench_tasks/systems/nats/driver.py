"""NATS driver on nats-py: core publish/subscribe, core request/reply, JetStream acked publish.

The driver only creates the stream, sends, and hands raw message bytes to a callback. It does not read
clocks: the generator stamps every timestamp itself (STYLE 1). Client options from the matrix
(`client.connect`) go to `nats.connect()` untouched, over the harness defaults.

A core subscription's messages go from nats-py's protocol parser straight to the harness (`client.DirectClient`): the
ordinary path builds a `Msg`, queues it and wakes a callback task for every message, which costs more
than everything else the harness does per message and delays every stamp by a trip round the event loop.
The rtt responder echoes from the same place, and a requester's reply resolves its wait right there
(`client.Replies`). The moment the server's bytes reach the process (before nats-py parses them) is signalled
to the generator (`watch_arrivals`), which stamps receipts then. Whatever is published goes to the
socket before the publishing call returns, not on the flusher task's next turn. What nats-py has read
from the server but not parsed yet, plus what waits unread in the socket, is the consumer's backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.client import JetStreamContext

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from ...load.routes import background_route
from ...spec.leader import leader_node
from .client import DirectClient, Replies, connect, direct_client
from .placement import await_stream_leader, place_stream_leader
from .settings import NatsCell

QUEUE_GROUP = "sixnines"
# A JetStream stream is one ordered log with one leader: its samples are recorded as partition 0, so the runner's
# leader timeline (`{partition: 0, leader}` from the cluster) attributes each received sample to the stream leader.
STREAM_PARTITION = 0
# A JetStream subscription's queue between nats-py's parser and the harness (core subscriptions have none: their
# messages go from the parser straight to the harness). Bounded: a message that does not fit is dropped by nats-py
# as a slow consumer, counted (ClientErrors.dropped) and fails the cell; a queue this deep already fails it for
# its backlog, long before it fills.
JS_PENDING_MSGS = 1 << 16
JS_PENDING_BYTES = 64 * 1024 * 1024
# The JetStream consumer acks each message it takes, so a delivery lost in flight (its server killed or restarted
# before the client read it) is delivered again rather than counted as a message the stream lost: with no acks
# (AckPolicy none) the server forgets a message once pushed, and a restart of the consumer's server showed as an
# acknowledged message lost although the R3 stream still held it. Redelivered within a cell's default drain (5 s);
# a redelivery of a message the harness did take counts as a duplicate, never as a second latency sample.
JS_ACK_WAIT_S = 2.0
# nats-py lets 4,000 JetStream publishes await their acks by default, then blocks the next `publish_async` until
# one comes: a stream without a leader for 8 s at 500/s stopped the open loop, and the cell failed as a generator
# behind its schedule when the broker was what had stopped. The harness never waits for the system, so the bound
# is the client's outbound buffer (`pending_size`) instead; what is never acknowledged counts as unacknowledged.
JS_MAX_PENDING_ACKS = 1 << 30


def subject_for(cell_id: str, route: str = "") -> str:
    return f"sixnines.{cell_id}" + (f".{route}" if route else "")


def stream_for(cell_id: str, route: str = "") -> str:
    return f"SIXNINES_{cell_id}" + (f"_{route}" if route else "")


class _One:
    """One message handed over (core NATS has neither partitions nor offsets; a JetStream stream is one
    partition with a sequence)."""

    __slots__ = ("_data", "_offset")

    def __init__(self, data: bytes, offset: int | None = None):
        self._data = data
        self._offset = offset

    def payloads(self) -> tuple[bytes]:
        return (self._data,)

    def partitions(self) -> tuple[int] | None:
        return None if self._offset is None else (STREAM_PARTITION,)

    def offsets(self) -> tuple[int] | None:
        return None if self._offset is None else (self._offset,)


class NatsDriver:
    """Everything a cell does against one NATS server, for one process."""

    message_threads = ("main",)  # nats-py reads, parses and writes on the event loop

    def __init__(
        self, url: str, cell: NatsCell, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        self.url = url
        self.client = dict(client or {})
        self.cell = cell
        self.route = route
        self.subject = subject_for(cell_id, route)
        self.stream = stream_for(cell_id, route)
        self.jetstream = cell.broker.mode == "jetstream"
        self.acks = self.jetstream
        self.connections: list[Client] = []
        self._contexts: dict[int, JetStreamContext] = {}
        self._subscription: Subscription | None = None
        self._replies: dict[int, Replies] = {}
        self._on_arrival: Callable[[], None] | None = None
        self.errors = ClientErrors()

    def js(self, nc: Client) -> JetStreamContext:
        """One JetStream context per connection: each context owns a reply subscription, so making one
        per message (as `nc.jetstream()` does on every call) leaks a subscription per message."""
        context = self._contexts.get(id(nc))
        if context is None:
            context = self._contexts[id(nc)] = nc.jetstream(publish_async_max_pending=JS_MAX_PENDING_ACKS)
        return context

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """Every connection opened from now on calls `on_arrival` when the server's bytes reach it (`DirectClient`)."""
        self._on_arrival = on_arrival

    async def open(self, name: str, count: int = 1) -> list[Client]:
        new = [
            await connect(self.url, self.cell, f"{name}-{i}", self.client, self._on_arrival, self.errors)
            for i in range(count)
        ]
        self.connections += new
        return new

    async def open_producer(self, name: str, connections: int) -> list[Client]:
        return await self.open(name, connections)

    async def open_consumer(self, name: str, on_messages: MessagesCallback, lagging: bool = False) -> None:
        if lagging:
            raise BrokerError("lagging consumers read a Kafka topic's backlog; NATS cells have none")
        (nc,) = await self.open(name)
        self._subscription = await self.subscribe(nc, on_messages)
        await nc.flush()  # the subscription is registered at the server before we report ready

    def backlog(self) -> int | None:
        """Messages the consumer's (or responder's) connection holds unparsed (bytes over the size of one framed
        message), plus a JetStream subscription's pending queue; None for a process that only sends."""
        if self._subscription is None:
            return None
        nc = self._subscription._conn
        unread = nc.unread_bytes() if isinstance(nc, DirectClient) else None
        if unread is None:
            return None
        frame = len(f"MSG {self.subject} {self._subscription._id} {self.cell.workload.message_size_bytes}\r\n") + 2
        return self._subscription.pending_msgs + unread // (frame + self.cell.workload.message_size_bytes)

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        (nc,) = await self.open(name)
        self._subscription = await self.respond(nc, on_request)
        await nc.flush()

    async def prepare(self) -> None:
        """JetStream: a fresh stream for the cell (an old one of the same name is deleted first), a replicated
        one with its leader elected before anything is sent; with `broker.leader`, led by node N
        (`placement`), a background stream apart."""
        if not self.jetstream:
            return
        (nc,) = await self.open("admin")
        js = self.js(nc)
        with contextlib.suppress(nats.js.errors.NotFoundError):
            await js.delete_stream(self.stream)
        storage = StorageType.FILE if self.cell.broker.storage == "file" else StorageType.MEMORY
        await js.add_stream(
            StreamConfig(
                name=self.stream,
                subjects=[self.subject],
                storage=storage,
                num_replicas=self.cell.broker.replicas,
            )
        )
        if self.cell.broker.replicas > 1:
            await await_stream_leader(nc, self.stream)  # before anything is sent: no publish into the election
        leader = leader_node(self.cell.broker.leader)
        if leader is not None and not self.route.startswith(background_route("")):
            await place_stream_leader(nc, self.stream, leader)  # verified: fails the cell naming who leads

    async def cleanup(self) -> None:
        if not self.jetstream:
            return
        nc = self.connections[0] if self.connections else (await self.open("admin"))[0]
        with contextlib.suppress(TimeoutError, nats.js.errors.NotFoundError, nats.errors.Error):
            await self.js(nc).delete_stream(self.stream)

    async def send_batch(self, nc: Client, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """Publish each message without waiting for the system; nats-py writes the batch to the socket in one
        go when the generator next yields. JetStream acks arrive later through `on_ack`."""
        refused: dict[int, str] = {}
        if self.jetstream:
            js, subject = self.js(nc), self.subject
            for seq, _stream, payload in messages:
                try:
                    future = await js.publish_async(subject, payload)
                except Exception as exc:
                    refused[seq] = type(exc).__name__
                    continue
                future.add_done_callback(functools.partial(_js_acked, seq, on_ack))
            return refused
        if isinstance(nc, DirectClient) and nc.is_connected:
            return nc.publish_batch(self.subject, messages)
        publish, subject = nc.publish, self.subject
        for seq, _stream, payload in messages:
            try:
                await publish(subject, payload)
            except Exception as exc:
                refused[seq] = type(exc).__name__
        return refused

    async def request(self, nc: Client, payload: bytes, timeout_s: float) -> None:
        """Core request/reply; returns when the reply arrives (raises on timeout)."""
        replies = self._replies.get(id(nc))
        if replies is None:
            replies = self._replies[id(nc)] = await Replies.open(direct_client(nc))
        await replies.request(self.subject, payload, timeout_s)

    async def subscribe(self, nc: Client, on_messages: MessagesCallback) -> Subscription:
        """Join the cell's queue group (core: straight from the parser) or its durable deliver group
        (JetStream, new messages only, through nats-py's own path: flow control and heartbeats live there)."""
        if not self.jetstream:
            return await direct_client(nc).subscribe_direct(
                self.subject, lambda _subject, _reply, data, _headers: on_messages(_One(data)), QUEUE_GROUP
            )

        direct = direct_client(nc)

        async def js_cb(msg: Msg) -> None:
            try:
                offset = msg.metadata.sequence.stream
            except Exception:
                offset = -1
            on_messages(_One(msg.data, offset))
            if msg.reply and not direct.publish_now(msg.reply, b""):  # an empty reply is an ack
                await direct.publish(msg.reply, b"")  # reconnecting: nats-py buffers it

        return await self.js(nc).subscribe(
            self.subject,
            queue=QUEUE_GROUP,
            cb=js_cb,
            manual_ack=True,
            pending_msgs_limit=JS_PENDING_MSGS,
            pending_bytes_limit=JS_PENDING_BYTES,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=JS_ACK_WAIT_S,
                # Unlimited: a limit (the server's default is 1,000) paces deliveries to the harness's acks, so a
                # slow harness would queue inside the broker, unseen, and land as the broker's latency.
                max_ack_pending=-1,
                deliver_policy=DeliverPolicy.NEW,
            ),
        )

    async def respond(self, nc: Client, on_request: Callable[[], None]) -> Subscription:
        """rtt responder: echo each request's payload back to its reply subject, from the parser."""
        direct = direct_client(nc)

        def echo(_subject: bytes, reply: bytes, data: bytes, _headers: bytes | None) -> Awaitable[None] | None:
            on_request()
            if direct.publish_now(reply.decode(), data):
                return None
            return direct.publish(reply.decode(), data)  # reconnecting: nats-py buffers it

        return await direct.subscribe_direct(self.subject, echo, QUEUE_GROUP)

    async def close(self) -> None:
        self._subscription = None
        self._replies.clear()
        for nc in self.connections:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), timeout=5)
        self.connections.clear()
        self._contexts.clear()


def _js_acked(seq: int, on_ack: AckCallback, fut: asyncio.Future) -> None:
    if fut.cancelled():
        on_ack(seq, None, None, "cancelled")
    elif fut.exception() is not None:
        on_ack(seq, None, None, type(fut.exception()).__name__)
    else:
        on_ack(seq, STREAM_PARTITION, fut.result().seq, None)
