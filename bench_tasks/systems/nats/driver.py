"""NATS driver on nats-py: core publish/subscribe, core request/reply, JetStream acked publish.

The driver only creates the stream, sends, and hands raw message bytes to a callback. It does not read
clocks: the generator stamps every timestamp itself (STYLE 1). Client options from the matrix
(`client.connect`) go to `nats.connect()` untouched, over the harness defaults.

A core subscription's messages go from nats-py's protocol parser straight to the harness (`_Client`): the
ordinary path builds a `Msg`, queues it and wakes a callback task for every message, which costs more
than everything else the harness does per message and delays every stamp by a trip round the event loop.
The rtt responder echoes from the same place, and a requester's reply resolves its wait right there
(`_Replies`). The moment the server's bytes reach the process (before nats-py parses them) is signalled
to the generator (`watch_arrivals`), which stamps receipts then. Whatever is published goes to the
socket before the publishing call returns, not on the flusher task's next turn. What nats-py has read
from the server but not parsed yet, plus what waits unread in the socket, is the consumer's backlog.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import ssl
import termios
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.client import JetStreamContext
from nats.protocol.command import pub_cmd

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from ...load.routes import background_route
from ...spec.leader import leader_node
from .cluster import servers_of
from .placement import await_stream_leader, place_stream_leader
from .settings import NatsCell

QUEUE_GROUP = "sixnines"
# A JetStream stream is one ordered log with one leader: its samples are recorded as partition 0, so the runner's
# leader timeline (`{partition: 0, leader}` from the cluster) attributes each received sample to the stream leader.
STREAM_PARTITION = 0
# Connection defaults a benchmark wants: fail fast at start, keep reconnecting quietly during a fault,
# and a large outbound buffer so a short stall does not turn into publish errors.
_CONNECT_DEFAULTS: dict[str, Any] = {
    "connect_timeout": 5,
    "max_reconnect_attempts": 5,
    "reconnect_time_wait": 0.5,
    "pending_size": 64 * 1024 * 1024,
    "skip_subject_validation": True,  # the harness's subjects are valid by construction; checks cost per publish
}
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


async def connect(
    url: str,
    cell: NatsCell,
    name: str,
    client: Mapping[str, Any] | None = None,
    on_arrival: Callable[[], None] | None = None,
    errors: ClientErrors | None = None,
) -> Client:
    """`client`: connection settings of external servers (user/password or token; `tls_ca_file` becomes a TLS
    context that trusts that CA), under the matrix's own `client.connect`. `on_arrival`: see `_Client`.
    `errors`: where nats-py's asynchronous errors are counted (a slow consumer's drops apart)."""
    counted = errors if errors is not None else ClientErrors()

    async def count(exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            counted.drop()
        else:
            counted.error(type(exc).__name__, str(exc))

    access = dict(client or {})
    ca_file = access.pop("tls_ca_file", None)
    if ca_file:
        access["tls"] = ssl.create_default_context(cafile=ca_file)
    nc = _Client()
    options = {
        **_CONNECT_DEFAULTS,
        "name": name,
        "error_cb": count,
        "closed_cb": nc.report_closed,
        **access,
        **cell.client.connect,
    }
    # A cluster's address lists every node comma-separated; nats-py takes a list (it refuses a joined string).
    await nc.connect(servers_of(url), **options)
    nc.on_arrival = on_arrival
    nc.watch_arrivals()
    return nc


# A direct handler: (subject, reply, payload, headers) as the parser read them; may return an awaitable.
Direct = Callable[[bytes, bytes, bytes, bytes | None], Awaitable[None] | None]


class _Client(Client):
    """nats-py's client, with the messages of chosen subscriptions handed from the parser to a function.

    `Client._process_msg` is where nats-py's parser delivers every MSG; for a subscription registered in
    `direct` the message goes to its function at once, and nats-py's Msg, pending queue and callback task
    are skipped (that subscription's `pending_msgs` stays 0). Every other subscription (JetStream) takes
    nats-py's own path untouched. nats-py is pinned (pyproject), and the integration tests receive through
    this path, so a change of that method's contract fails them."""

    def __init__(self) -> None:
        super().__init__()
        self.direct: dict[int, Direct] = {}
        self.on_arrival: Callable[[], None] | None = None
        self.on_closed: Callable[[], None] | None = None
        self._watched: Any = None  # the stream reader whose reads call on_arrival

    async def report_closed(self) -> None:
        """nats-py's closed_cb: the connection closed for good (its owner closed it, or nats-py gave up
        reconnecting); told to `on_closed`, so a protocol on top (NATS Streaming) can drop what it built on it."""
        if self.on_closed is not None:
            self.on_closed()

    def watch_arrivals(self) -> None:
        """Call `on_arrival` each time the transport hands the stream reader bytes (before nats-py parses
        them). A reconnect brings a new reader; the next message installs the watch on it."""
        reader = getattr(self._transport, "_io_reader", None)
        if self.on_arrival is None or reader is None or reader is self._watched:
            return
        feed, on_arrival = reader.feed_data, self.on_arrival

        def feed_data(data: bytes) -> None:
            on_arrival()
            feed(data)

        reader.feed_data = feed_data
        self._watched = reader
        on_arrival()  # whatever this reader already holds arrived no later than now

    async def _process_msg(self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes | None) -> None:
        if self.on_arrival is not None and self._watched is not getattr(self._transport, "_io_reader", None):
            self.watch_arrivals()
        deliver = self.direct.get(sid)
        if deliver is None:
            await super()._process_msg(sid, subject, reply, data, headers)
            return
        pending = deliver(subject, reply, data, headers)
        if pending is not None:
            await pending

    async def subscribe_direct(self, subject: str, deliver: Direct, queue: str = "") -> Subscription:
        # No limits, and no queue to limit: these messages never enter nats-py's pending queue (`_process_msg`).
        sub = await self.subscribe(subject, queue=queue, pending_msgs_limit=0, pending_bytes_limit=0)
        self.direct[sub._id] = deliver
        return sub

    def publish_batch(self, subject: str, messages: Outgoing) -> dict[int, str]:
        """Publish every message as it is pulled, then write them all to the socket in one call: `publish`'s
        PUB commands (nats-py's own `pub_cmd`) without a coroutine and a flush request per message. Only
        while connected; during a reconnect the caller uses `publish`, which buffers."""
        refused: dict[int, str] = {}
        commands = []
        for seq, _stream, payload in messages:
            if len(payload) > self._max_payload:
                refused[seq] = "MaxPayloadError"
                continue
            commands.append(pub_cmd(subject, "", payload))
        self._queue(commands)
        return refused

    def publish_now(self, subject: str, payload: bytes, reply: str = "") -> bool:
        """One PUB written to the socket before returning (an rtt request or echo); False when not connected
        or too large, and the caller falls back to `publish`."""
        if not self.is_connected or len(payload) > self._max_payload:
            return False
        self._queue([pub_cmd(subject, reply, payload)])
        return True

    def write_publishes(self, items: Iterable[tuple[str, str, bytes]]) -> None:
        """PUB commands (subject, reply, payload) written to the socket in one call: for clients of protocols on
        top of NATS (NATS Streaming's batched publishes). The caller checked that the client is connected and
        that every payload fits `max_payload`."""
        self._queue([pub_cmd(subject, reply, payload) for subject, reply, payload in items])

    def _queue(self, commands: list[bytes]) -> None:
        size = sum(len(c) for c in commands)
        self._pending.extend(commands)
        self._pending_data_size += size
        self.stats["out_msgs"] += len(commands)
        self.stats["out_bytes"] += size
        self.write_pending()

    def write_pending(self) -> None:
        """Write what `publish` queued to the socket now, as nats-py's flusher task would on its next turn of
        the event loop: a message that has been stamped sent leaves at once, not a loop iteration later."""
        if self._pending_data_size and self.is_connected and self._transport is not None:
            self._transport.writelines(self._pending)
            self._pending = []
            self._pending_data_size = 0

    def unread_bytes(self) -> int | None:
        """Bytes from the server this client has not parsed: in its stream reader, and unread in the socket."""
        try:
            transport = self._transport
            reader = transport._io_reader  # type: ignore[union-attr]
            sock = transport._io_writer.get_extra_info("socket")  # type: ignore[union-attr]
            queued = int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4)), "little")
            return len(reader._buffer) + queued
        except Exception:  # closed, reconnecting, or a transport without a socket (websocket)
            return None


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
        self._replies: dict[int, _Replies] = {}
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
        """Every connection opened from now on calls `on_arrival` when the server's bytes reach it (`_Client`)."""
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
        unread = nc.unread_bytes() if isinstance(nc, _Client) else None
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
        if isinstance(nc, _Client) and nc.is_connected:
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
            replies = self._replies[id(nc)] = await _Replies.open(_direct_client(nc))
        await replies.request(self.subject, payload, timeout_s)

    async def subscribe(self, nc: Client, on_messages: MessagesCallback) -> Subscription:
        """Join the cell's queue group (core: straight from the parser) or its durable deliver group
        (JetStream, new messages only, through nats-py's own path: flow control and heartbeats live there)."""
        if not self.jetstream:
            return await _direct_client(nc).subscribe_direct(
                self.subject, lambda _subject, _reply, data, _headers: on_messages(_One(data)), QUEUE_GROUP
            )

        direct = _direct_client(nc)

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
        direct = _direct_client(nc)

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


def _direct_client(nc: Client) -> _Client:
    if not isinstance(nc, _Client):
        raise BrokerError("direct delivery needs the harness's own nats-py client (drivers.nats.connect)")
    return nc


class _Replies:
    """The replies of one synchronous rtt connection, on an inbox delivered straight from the parser.

    Each request gets its own reply subject (`<inbox>.<n>`), so a reply that comes after its request timed
    out is recognised and dropped instead of answering the next one. A reply with headers is the server's
    status (503: no responders) and fails the request."""

    def __init__(self, nc: _Client, inbox: str):
        self.nc, self.inbox = nc, inbox
        self.count = 0
        self.expected = b""
        self.waiting: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, nc: _Client) -> _Replies:
        replies = cls(nc, nc.new_inbox())
        await nc.subscribe_direct(f"{replies.inbox}.*", replies.deliver)
        await nc.flush()
        return replies

    def deliver(self, subject: bytes, _reply: bytes, _data: bytes, headers: bytes | None) -> None:
        waiting = self.waiting
        if waiting is None or waiting.done() or subject != self.expected:
            return  # a late reply to a request that already timed out
        if headers:
            waiting.set_exception(nats.errors.NoRespondersError())
        else:
            waiting.set_result(None)

    async def request(self, subject: str, payload: bytes, timeout_s: float) -> None:
        self.count += 1
        reply = f"{self.inbox}.{self.count}"
        self.expected = reply.encode()
        loop = asyncio.get_running_loop()
        self.waiting = waiting = loop.create_future()
        timer = loop.call_later(timeout_s, _time_out, waiting)
        try:
            if not self.nc.publish_now(subject, payload, reply):
                await self.nc.publish(subject, payload, reply=reply)
            await waiting
        finally:
            timer.cancel()
            self.waiting = None


def _time_out(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_exception(nats.errors.TimeoutError())


def _js_acked(seq: int, on_ack: AckCallback, fut: asyncio.Future) -> None:
    if fut.cancelled():
        on_ack(seq, None, None, "cancelled")
    elif fut.exception() is not None:
        on_ack(seq, None, None, type(fut.exception()).__name__)
    else:
        on_ack(seq, STREAM_PARTITION, fut.result().seq, None)
