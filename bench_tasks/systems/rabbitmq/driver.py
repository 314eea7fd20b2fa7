"""RabbitMQ driver on pika's asyncio connection adapter: publish (with confirms), consume (auto or manual acks),
and request/reply through the broker (direct reply-to).

A route is one queue, declared by `prepare` with the cell's queue type, durability and arguments, behind the
cell's exchange (the nameless default one, or a declared exchange of the chosen type bound to the queue). The
driver never reads a clock (STYLE 1): it hands bodies to pika and bodies back to the generator.

pika runs on the harness's own event loop (`custom_ioloop`): a publish is a plain call that frames the message
into the connection's write buffer; once a batch is framed, `connection.write_now` sends the buffer in one write
rather than chunk by chunk when the loop next turns. Publisher confirms arrive as Basic.Ack/Nack frames (one may
cover many deliveries, `multiple`): each channel numbers its publishes 1, 2, … and `Confirms` maps those numbers
back to the generator's sequence numbers. Why pika and not aio-pika: `bench/rabbitmq_clients.py` (docs/rabbitmq.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import pika
from pika.adapters.asyncio_connection import AsyncioConnection

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from .confirms import Confirms
from .connection import abandon, call, connect, control_reply, write_now
from .nodes import amqp_urls
from .replies import Replies
from .settings import RabbitmqCell

# A quorum queue or a stream has one leader: its samples are recorded as partition 0, so the cell's leader
# timeline (`{partition: 0, leader}`) attributes each sample to the queue's leader node. A classic queue has none.
QUEUE_PARTITION = 0
_REPLICATED = ("quorum", "stream")
RECONNECT_PAUSE_S = 0.5  # between attempts to reach another node after a connection's node went
RESUBSCRIBE_TRIES = 60


def queue_for(cell_id: str, route: str = "") -> str:
    return f"sixnines.{cell_id}" + (f".{route}" if route else "")


def exchange_for(cell: RabbitmqCell, queue: str) -> str:
    """The exchange the cell publishes to: '' (the default exchange routes by queue name) or its own."""
    return "" if cell.broker.exchange == "default" else f"{queue}.x"


def queue_arguments(cell: RabbitmqCell) -> dict[str, Any]:
    """x- arguments of the cell's queue: its type and replica count, then the matrix's own."""
    broker = cell.broker
    args: dict[str, Any] = {"x-queue-type": broker.queue_type}
    if broker.queue_type == "quorum":
        args["x-quorum-initial-group-size"] = broker.replicas
    elif broker.queue_type == "stream":
        args["x-initial-cluster-size"] = broker.replicas
    return args | dict(broker.queue)


class _Producer:
    """One connection and its channel, with confirms if the cell asks for them. After its node goes, the next
    send starts a reconnection to another node (`RabbitmqDriver._reconnect`); until it is open, sends are
    refused (counted as send errors, never as acknowledged)."""

    def __init__(self, name: str, conn: AsyncioConnection, channel: Any, confirms: Confirms | None):
        self.name, self.conn, self.channel, self.confirms = name, conn, channel, confirms
        self.replies: Replies | None = None
        self.attempt = 0
        self.reconnecting: asyncio.Task[None] | None = None

    def unwritten(self) -> int:
        """Bytes pika holds for the connection's socket (its transport's write buffer; pika is pinned)."""
        transport = self.conn._transport
        return 0 if transport is None else transport.get_write_buffer_size()


class _One:
    """One delivery handed over; a stream's deliveries carry their offset."""

    __slots__ = ("_data", "_offset", "_partition")

    def __init__(self, data: bytes, partition: int | None, offset: int | None = None):
        self._data, self._partition, self._offset = data, partition, offset

    def payloads(self) -> tuple[bytes]:
        return (self._data,)

    def partitions(self) -> tuple[int] | None:
        return None if self._partition is None else (self._partition,)

    def offsets(self) -> tuple[int] | None:
        return None if self._offset is None else (self._offset,)


class RabbitmqDriver:
    """Everything a cell does against one RabbitMQ cluster, for one process."""

    message_threads = ("main",)  # pika reads, parses and writes on the event loop

    def __init__(
        self, url: str, cell: RabbitmqCell, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        self.urls = amqp_urls(url)
        self.access = dict(client or {})
        self.cell = cell
        self.queue = queue_for(cell_id, route)
        self.exchange = exchange_for(cell, self.queue)
        self.acks = cell.client.confirms and cell.measurement != "rtt"
        self.partition = QUEUE_PARTITION if cell.broker.queue_type in _REPLICATED else None
        self.properties = _properties(cell, self.queue)
        self.max_unwritten = cell.client.max_unwritten_bytes
        self.connections: list[AsyncioConnection] = []  # the open ones (a closed one is forgotten)
        self.errors = ClientErrors()  # connection and channel losses, failed reconnects: counted, never swallowed
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()  # resubscriptions under way
        self._stream_next: int | None = None  # a stream consumer's next offset, where a resubscription resumes

    async def open_channel(self, name: str, attempt: int = 0) -> tuple[AsyncioConnection, Any]:
        """A new connection and a channel on it; connections are spread over the cluster's nodes by name (each
        worker process has its own driver, so a counter would send every worker to the first node), and each
        new `attempt` after a loss goes to the next node."""
        url = self.urls[(zlib.crc32(name.encode()) + attempt) % len(self.urls)]
        conn = await connect(url, name, self.cell.client.connect, self.access)
        self.connections.append(conn)
        conn.add_on_close_callback(self._forget)
        try:
            channel = await call(lambda cb: conn.channel(on_open_callback=cb))
        except BaseException:
            abandon(conn)
            raise
        return conn, channel

    def _forget(self, conn: AsyncioConnection, _reason: Any = None) -> None:
        """A connection that closed (the node's doing, or the driver's) is no longer held."""
        if conn in self.connections:
            self.connections.remove(conn)

    # -- routes ---------------------------------------------------------------------------------------------------
    async def prepare(self) -> None:
        """A fresh queue (an old one of the same name is deleted first) behind the cell's exchange."""
        _conn, channel = await self.open_channel("admin")
        b, queue, exchange = self.cell.broker, self.queue, self.exchange
        await control_reply(channel, lambda cb: channel.queue_delete(queue, callback=cb), f"delete queue {queue!r}")
        await control_reply(
            channel,
            lambda cb: channel.queue_declare(
                queue, durable=b.durable, arguments=queue_arguments(self.cell), callback=cb
            ),
            f"declare queue {queue!r}",
        )
        if exchange:
            await control_reply(
                channel,
                lambda cb: channel.exchange_declare(exchange, b.exchange, durable=b.durable, callback=cb),
                f"declare exchange {exchange!r}",
            )
            await control_reply(
                channel,
                lambda cb: channel.queue_bind(queue, exchange, **_binding(self.cell, queue), callback=cb),
                f"bind queue {queue!r} to {exchange!r}",
            )

    async def cleanup(self) -> None:
        """Delete the cell's queue, then its exchange. Returns once the node confirmed each deletion
        (Queue.DeleteOk, Exchange.DeleteOk); raises BrokerError naming what it refused or never answered."""
        _conn, channel = await self.open_channel("admin")
        queue, exchange = self.queue, self.exchange
        await control_reply(channel, lambda cb: channel.queue_delete(queue, callback=cb), f"delete queue {queue!r}")
        if exchange:
            await control_reply(
                channel, lambda cb: channel.exchange_delete(exchange, callback=cb), f"delete exchange {exchange!r}"
            )

    # -- producers ------------------------------------------------------------------------------------------------
    async def open_producer(self, name: str, connections: int) -> list[_Producer]:
        return [await self._producer(f"{name}-{i}") for i in range(connections)]

    async def _producer(self, name: str) -> _Producer:
        producer = _Producer(name, None, None, None)
        await self._open_producer_channel(producer)
        return producer

    async def _open_producer_channel(self, producer: _Producer) -> None:
        conn, channel = await self.open_channel(producer.name, producer.attempt)
        confirms = None
        if self.acks:
            confirms = Confirms(
                on_ack=producer.confirms.on_ack if producer.confirms else None, partition=self.partition
            )
            await call(lambda cb: channel.confirm_delivery(confirms.settle, callback=cb))
            channel.add_on_close_callback(lambda _ch, reason: self._channel_lost(confirms, reason))
        producer.conn, producer.channel, producer.confirms, producer.replies = conn, channel, confirms, None

    def _channel_lost(self, confirms: Confirms, reason: Any) -> None:
        if not self._closing:
            self.errors.error("channel_closed", str(reason))
        confirms.fail_all(f"channel closed: {reason}")

    def _reconnect(self, producer: _Producer, pause_first: bool = False) -> None:
        """Start reopening `producer` on the next nodes in turn (once at a time), a moment apart; the old
        connection is closed once the new one is open."""
        if self._closing or (producer.reconnecting is not None and not producer.reconnecting.done()):
            return

        async def again() -> None:
            if pause_first:
                await asyncio.sleep(RECONNECT_PAUSE_S)
            old = producer.conn
            while not self._closing:
                producer.attempt += 1
                try:
                    await self._open_producer_channel(producer)
                    break
                except Exception as exc:
                    self.errors.error("reconnect_failed", str(exc))
                    await asyncio.sleep(RECONNECT_PAUSE_S)
            if old is not None and old.is_open:
                old.close()

        producer.reconnecting = asyncio.get_running_loop().create_task(again())
        self._tasks.add(producer.reconnecting)

    async def send_batch(self, producer: _Producer, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """Frame every message into the connection's buffer, then send it in one write. A send
        past the connection's window (`client.max_unconfirmed` publishes awaiting their confirm, or
        `client.max_unwritten_bytes` held for the socket: a stalled node takes nothing) is refused, never
        buffered: pika's buffer and the confirms map would grow without limit."""
        refused: dict[int, str] = {}
        if not producer.channel.is_open:
            self._reconnect(producer)
            return dict.fromkeys((seq for seq, _stream, _payload in messages), "ChannelClosed")
        if producer.confirms is not None and producer.confirms.nacked:
            # RabbitMQ 3.10 nacks every publish of a channel that first reached a quorum queue while it had no
            # leader, even after one is elected (docs/rabbitmq.md): a nack makes the producer open a new channel.
            self._reconnect(producer, pause_first=True)
        publish, confirms = producer.channel.basic_publish, producer.confirms
        exchange, key, props = self.exchange, self.queue, self.properties
        window, unwritten, most_unwritten = self.cell.client.max_unconfirmed, producer.unwritten, self.max_unwritten
        for seq, _stream, payload in messages:
            if confirms is not None and len(confirms.pending) >= window:
                refused[seq] = "ConfirmWindowFull"
                continue
            if unwritten() >= most_unwritten:
                refused[seq] = "WriteBufferFull"
                continue
            try:
                publish(exchange, key, payload, props)
            except Exception as exc:  # a closed channel or connection (a node down)
                refused[seq] = type(exc).__name__
                continue
            if confirms is not None:
                confirms.sent(seq, on_ack)
        write_now(producer.conn)
        return refused

    async def request(self, producer: _Producer, payload: bytes, timeout_s: float) -> None:
        """rtt: publish with direct reply-to and return when the responder's echo arrives."""
        if not producer.channel.is_open:
            self._reconnect(producer)
            raise BrokerError("channel closed: reconnecting to another node")
        if producer.replies is None:
            producer.replies = await Replies.open(producer.channel)
        await producer.replies.request(self.exchange, self.queue, payload, self.properties, timeout_s)

    # -- consumers ------------------------------------------------------------------------------------------------
    async def open_consumer(self, name: str, on_messages: MessagesCallback, lagging: bool = False) -> None:
        if lagging:
            raise BrokerError("lagging consumers are not built for RabbitMQ cells")
        partition, manual = self.partition, self.cell.client.acks == "manual"
        stream = self.cell.broker.queue_type == "stream"

        def deliver(ch: Any, method: Any, properties: Any, body: bytes) -> None:
            offset = (properties.headers or {}).get("x-stream-offset") if stream else None
            on_messages(_One(body, partition, offset))
            if offset is not None:
                self._stream_next = offset + 1
            if manual:
                ch.basic_ack(method.delivery_tag)

        await self._subscribe(name, deliver)

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        """rtt: echo every request's body to its reply-to (the requester's direct reply-to channel)."""
        manual = self.cell.client.acks == "manual"

        def echo(ch: Any, method: Any, properties: Any, body: bytes) -> None:
            on_request()
            reply = pika.BasicProperties(correlation_id=properties.correlation_id)
            ch.basic_publish("", properties.reply_to, body, reply)
            if manual:
                ch.basic_ack(method.delivery_tag)

        await self._subscribe(name, echo)

    async def _subscribe(self, name: str, on_message: Callable[..., None], attempt: int = 0) -> None:
        """Consume on a new connection and return once the broker confirmed the consumer (Basic.ConsumeOk): from
        then on it sees every message routed to the queue. Should the connection's node go, the consumer
        subscribes again on the next node (with manual acks, what it had not acked is redelivered)."""
        conn, channel = await self.open_channel(name, attempt)
        client = self.cell.client
        if client.prefetch:
            await call(lambda cb: channel.basic_qos(prefetch_count=client.prefetch, callback=cb))
        arguments = None
        if self.cell.broker.queue_type == "stream":
            arguments = {"x-stream-offset": "next" if self._stream_next is None else self._stream_next}
        await call(
            lambda cb: channel.basic_consume(
                self.queue, on_message, auto_ack=client.acks == "auto", arguments=arguments, callback=cb
            )
        )
        conn.add_on_close_callback(lambda _c, reason: self._resubscribe(name, on_message, attempt + 1, reason))

    def _resubscribe(self, name: str, on_message: Callable[..., None], attempt: int, reason: Any = None) -> None:
        if self._closing:
            return
        self.errors.error("connection_closed", str(reason))

        async def again() -> None:
            for tries in range(RESUBSCRIBE_TRIES):
                if self._closing:
                    return
                try:
                    await self._subscribe(name, on_message, attempt + tries)
                    return
                except Exception as exc:
                    self.errors.error("resubscribe_failed", str(exc))
                    await asyncio.sleep(RECONNECT_PAUSE_S)

        self._tasks.add(asyncio.get_running_loop().create_task(again()))

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """Not exposed: pika reads and parses in one step, so receipts are stamped at hand-over."""

    def backlog(self) -> int | None:
        return None

    async def close(self) -> None:
        self._closing = True
        for task in self._tasks:
            task.cancel()
        for conn in list(self.connections):  # each leaves the list as it closes (`_forget`)
            if conn.is_closed or conn.is_closing:
                continue
            closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            conn.add_on_close_callback(lambda *_a, f=closed: f.done() or f.set_result(None))
            with contextlib.suppress(Exception):
                conn.close()
                await asyncio.wait_for(closed, 5)
        self.connections.clear()


def _properties(cell: RabbitmqCell, queue: str) -> Any:
    """Delivery mode 2 (to disk) where the cell's messages are persistent; a headers exchange routes by header."""
    headers = {"route": queue} if cell.broker.exchange == "headers" else None
    return pika.BasicProperties(delivery_mode=2 if cell.broker.persistent else None, headers=headers)


def _binding(cell: RabbitmqCell, queue: str) -> dict[str, Any]:
    if cell.broker.exchange == "headers":
        return {"arguments": {"x-match": "all", "route": queue}}
    return {"routing_key": queue}  # direct and topic route by it; fanout ignores it
