"""Redis driver on redis-py asyncio connections with the hiredis parser: pub/sub (PUBLISH/SUBSCRIBE, fire and
forget), Streams (XADD with `MAXLEN ~`, whose reply is the send's acknowledgement; XREADGROUP in the cell's consumer
group, XACK unless NOACK) and request/reply over pub/sub (rtt).

Names: a route is the channel or stream `sixnines.<names>[.<route>]`. An rtt requester connection publishes its
requests on `<route>.req.<id>` and listens on `<route>.rep.<id>`; the responder subscribes to the pattern
`<route>.req.*` and answers each request on the reply channel its request channel names, so the payload stays the
size the cell says (pub/sub has no reply-to header). A reply is matched to its request by its bytes (the harness
stamps each payload uniquely), so a late reply to a request that timed out is dropped, not taken for the next one.

Both directions work in batches (STYLE 1): `send_batch` packs every command of a batch into one write, and every
read from a socket hands over all it completed at once (`client.read_replies`). Nothing here reads a clock.

A lost connection is counted (`ClientErrors`), closed on this side and forgotten: a sender refuses every send
until it is connected again (a new connection is tried at most every `RECONNECT_PAUSE_S`), a subscriber subscribes
again once the server answers, and what was published meanwhile is lost, as pub/sub loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import termios
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, ResponseError

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from ...load.routes import final_route
from . import client as rc
from .settings import RedisCell

STREAM_PARTITION = 0  # a stream is one ordered log on the primary: samples are recorded as partition 0
RECONNECT_PAUSE_S = 0.5
_SEQ_BITS = 20  # an entry id `<ms>-<seq>` as one integer offset: ms << 20 | seq (a million entries per ms)
# Bytes of RESP framing around a payload, to turn unread bytes into messages: a `message` push of a short channel
# (*3, three bulk-string headers and their CRLFs, the channel) or an XREADGROUP entry (id, field name).
_FRAMING = 64


def key_for(cell_id: str, route: str = "") -> str:
    """The channel (pubsub) or stream (streams) of a route."""
    return f"sixnines.{cell_id}" + (f".{route}" if route else "")


def route_name(cell: RedisCell, names: str) -> str:
    return key_for(names, final_route(cell))  # a chain's second hop: what the measured consumers read


def request_channel(key: str, requester: str) -> str:
    return f"{key}.req.{requester}"


def reply_channel(key: str, request: bytes) -> bytes:
    """The reply channel of a request channel (`<key>.req.<id>` -> `<key>.rep.<id>`)."""
    head, _, requester = request.rpartition(b".req.")
    return head + b".rep." + requester


def entry_offset(entry_id: bytes) -> int:
    """A stream entry id `<ms>-<seq>` as the sample's integer offset, increasing with the id."""
    ms, _, seq = entry_id.partition(b"-")
    return (int(ms) << _SEQ_BITS) | int(seq)


class _Batch:
    """Messages one socket read completed, handed over together (a stream's carry partition 0 and offsets)."""

    __slots__ = ("_offsets", "_payloads")

    def __init__(self, payloads: list[bytes], offsets: list[int] | None = None):
        self._payloads, self._offsets = payloads, offsets

    def payloads(self) -> list[bytes]:
        return self._payloads

    def partitions(self) -> list[int] | None:
        return None if self._offsets is None else [STREAM_PARTITION] * len(self._offsets)

    def offsets(self) -> list[int] | None:
        return self._offsets


class _Sender:
    """One producer connection: commands written without waiting, replies read in batches by a task of its own.
    With acknowledgements (XADD), each reply settles the oldest waiting seq (RESP answers in order)."""

    def __init__(self, driver: RedisDriver, name: str):
        self.driver, self.name = driver, name
        self.conn: Connection | None = None
        self.waiting: deque[int] = deque()
        self.on_ack: AckCallback | None = None
        self.failed: str | None = "not connected"
        self.tried = 0.0
        self.reader: asyncio.Task[None] | None = None

    async def open(self) -> None:
        self.tried = time.monotonic()
        lost, self.conn = self.conn, await self.driver.connect(self.name)
        if lost is not None:
            await lost.disconnect()  # the lost connection's socket, closed on our side too
        self.failed = None
        self.reader = asyncio.get_running_loop().create_task(self._read())

    def reconnect_due(self) -> bool:
        return not self.driver.closing and time.monotonic() - self.tried >= RECONNECT_PAUSE_S

    async def send(self, seqs: list[int], commands: list[rc.Command]) -> str | None:
        """Write the commands in one go; the error text when they could not be written."""
        if self.failed is not None and self.reconnect_due():
            with contextlib.suppress(BrokerError):
                await self.open()
        if self.failed is not None or self.conn is None:
            return self.failed
        if self.driver.acks:
            self.waiting.extend(seqs)
        try:
            await self.conn.send_packed_command(self.conn.pack_commands(commands), check_health=False)
        except (ConnectionError, OSError, RedisConnectionError) as exc:
            self._fail(f"{type(exc).__name__}: {exc}")
            return self.failed if not self.driver.acks else None  # with acks, _fail settled each one
        return None

    async def _read(self) -> None:
        conn = self.conn
        assert conn is not None
        try:
            while True:
                for reply in await rc.read_replies(conn):
                    self._settle(reply)
        except (ConnectionError, OSError, RedisConnectionError) as exc:
            self._fail(f"{type(exc).__name__}: {exc}")
            await conn.disconnect()  # the lost connection's socket, closed on our side at once

    def _settle(self, reply: Any) -> None:
        error = f"{type(reply).__name__}: {reply}" if isinstance(reply, Exception) else None
        if error is not None:
            self.driver.errors.error("reply_error", error)
        if not self.driver.acks:
            return
        seq = self.waiting.popleft()
        if self.on_ack is not None:
            if error is None:
                self.on_ack(seq, STREAM_PARTITION, entry_offset(reply), None)
            else:
                self.on_ack(seq, None, None, error)

    def _fail(self, reason: str) -> None:
        """The connection is gone: what waits for a reply never gets one; later sends are refused."""
        if self.failed is None and not self.driver.closing:
            self.driver.errors.error("connection_lost", reason)
        self.failed = reason
        while self.waiting:
            seq = self.waiting.popleft()
            if self.on_ack is not None:
                self.on_ack(seq, None, None, reason)
        if self.conn is not None:
            self.conn._parser.on_disconnect()  # hiredis's buffer of the lost connection is not read again

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reader
        if self.conn is not None:
            await self.conn.disconnect()


class _Requester:
    """One synchronous rtt connection: a sender for requests and a subscription to its own reply channel."""

    def __init__(self, sender: _Sender, channel: str):
        self.sender, self.channel = sender, channel
        self.expected: bytes | None = None
        self.waiting: asyncio.Future[None] | None = None

    def deliver(self, replies: list[bytes]) -> None:
        waiting = self.waiting
        if waiting is not None and not waiting.done() and self.expected in replies:
            waiting.set_result(None)

    async def request(self, payload: bytes, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        self.expected, self.waiting = payload, loop.create_future()
        timer = loop.call_later(timeout_s, _time_out, self.waiting)
        try:
            error = await self.sender.send([0], [rc.publish_command(self.channel, payload)])
            if error is not None:
                raise BrokerError(error)
            await self.waiting
        finally:
            timer.cancel()
            self.expected = self.waiting = None


def _time_out(waiting: asyncio.Future[None]) -> None:
    if not waiting.done():
        waiting.set_exception(TimeoutError("no reply before the request timeout"))


class RedisDriver:
    """Everything a cell does against one Redis server (its primary), for one process."""

    message_threads = ("main",)  # redis-py reads, hiredis parses and the driver writes on the event loop

    def __init__(
        self, url: str, cell: RedisCell, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        self.url = url
        self.access = dict(client or {})
        self.cell = cell
        self.key = key_for(cell_id, route)
        self.streams = cell.broker.mode == "streams"
        self.acks = self.streams and cell.measurement != "rtt"
        self.maxlen = cell.broker.stream.maxlen
        self.group = cell.broker.stream.group
        self.errors = ClientErrors()
        self.closing = False
        self.senders: list[_Sender] = []
        self.connections: list[Connection] = []  # subscribers' and readers' connections
        self._tasks: set[asyncio.Task[None]] = set()
        self._on_arrival: Callable[[], None] | None = None
        self._watched: Connection | None = None  # the consumer's connection, whose unread bytes are the backlog

    async def connect(self, name: str) -> Connection:
        return await rc.connect(self.url, self.cell.client, name, self.access)

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """Every read loop opened from now on calls `on_arrival` when the server's bytes reach it, before hiredis
        parses them."""
        self._on_arrival = on_arrival

    # -- routes ---------------------------------------------------------------------------------------------------
    async def prepare(self) -> None:
        """Streams: a fresh stream (an old one of the same name is deleted) with the cell's consumer group."""
        if not self.streams:
            return
        conn = await self.connect("sixnines-admin")
        try:
            await _call(conn, "DEL", self.key)
            await _call(conn, *rc.group_create_command(self.key, self.group))
        finally:
            await conn.disconnect()

    async def cleanup(self) -> None:
        if not self.streams:
            return
        with contextlib.suppress(BrokerError, RedisError, OSError):
            conn = await self.connect("sixnines-admin")
            try:
                await _call(conn, "DEL", self.key)
            finally:
                await conn.disconnect()

    # -- producers ------------------------------------------------------------------------------------------------
    async def open_producer(self, name: str, connections: int) -> list[Any]:
        senders = [await self._sender(f"{name}-{i}") for i in range(connections)]
        if self.cell.measurement != "rtt":
            return senders
        return [await self._requester(sender) for sender in senders]

    async def _sender(self, name: str) -> _Sender:
        sender = _Sender(self, name)
        await sender.open()
        self.senders.append(sender)
        return sender

    async def send_batch(self, sender: _Sender, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """Pack every message's PUBLISH or XADD and write them in one go; XADD replies arrive through `on_ack`."""
        sender.on_ack = on_ack
        seqs: list[int] = []
        commands: list[rc.Command] = []
        if self.streams:
            key, maxlen = self.key, self.maxlen
            for seq, _stream, payload in messages:
                seqs.append(seq)
                commands.append(rc.xadd_command(key, payload, maxlen))
        else:
            key = self.key
            for seq, _stream, payload in messages:
                seqs.append(seq)
                commands.append(rc.publish_command(key, payload))
        error = await sender.send(seqs, commands) if commands else None
        return dict.fromkeys(seqs, error) if error is not None else {}

    async def request(self, requester: _Requester, payload: bytes, timeout_s: float) -> None:
        """rtt: publish the request and return when its echo arrives on the requester's reply channel."""
        await requester.request(payload, timeout_s)

    async def _requester(self, sender: _Sender) -> _Requester:
        requester = _Requester(sender, request_channel(self.key, sender.name))
        reply = reply_channel(self.key, requester.channel.encode()).decode()
        await self._subscribe(f"{sender.name}-replies", [reply], lambda batch: requester.deliver(_payloads(batch)))
        return requester

    # -- consumers ------------------------------------------------------------------------------------------------
    async def open_consumer(self, name: str, on_messages: MessagesCallback, lagging: bool = False) -> None:
        if lagging:
            raise BrokerError("lagging consumers are not built for Redis cells")
        if self.streams:
            await self._read_group(name, on_messages)
            return
        await self._subscribe(name, [self.key], lambda batch: on_messages(_Batch(_payloads(batch))), watched=True)

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        """rtt: echo every request to the reply channel its request channel names, a batch of echoes per read."""
        sender = await self._sender(f"{name}-echo")

        async def echo(batch: list[Any]) -> None:
            commands = []
            for push in batch:
                if push[0] == b"pmessage":
                    on_request()
                    commands.append(rc.publish_command(reply_channel(self.key, push[2]), push[3]))
            if commands:
                await sender.send([0] * len(commands), commands)

        await self._subscribe(name, [request_channel(self.key, "*")], echo, pattern=True, watched=True)

    async def _subscribe(
        self,
        name: str,
        channels: Sequence[str],
        on_pushes: Callable[[list[Any]], Any],
        pattern: bool = False,
        watched: bool = False,
    ) -> None:
        """Subscribe on a connection of its own and return once the server confirmed (from then on nothing
        published is missed); its pushes go to `on_pushes` a read at a time. A lost connection subscribes again."""
        conn = await self._subscribed(name, channels, pattern)
        if watched:
            self._watched = conn

        async def loop(conn: Connection) -> None:
            while not self.closing:
                try:
                    while True:
                        pending = on_pushes(await rc.read_replies(conn, self._on_arrival))
                        if pending is not None:
                            await pending
                except (ConnectionError, OSError, RedisConnectionError) as exc:
                    if self.closing:
                        return
                    self.errors.error("connection_lost", f"{type(exc).__name__}: {exc}")
                await self._forget(conn)
                conn = await self._again(lambda: self._subscribed(name, channels, pattern))
                if watched:
                    self._watched = conn

        self._spawn(loop(conn))

    async def _subscribed(self, name: str, channels: Sequence[str], pattern: bool) -> Connection:
        """A new connection subscribed to `channels`, held by the driver; closed if the server did not confirm."""
        conn = await self.connect(name)
        await _held_if(conn, rc.subscribe(conn, channels, pattern))
        self.connections.append(conn)
        return conn

    async def _forget(self, conn: Connection) -> None:
        """A lost connection: closed on our side too (its socket, hiredis's buffer) and no longer held."""
        if conn in self.connections:
            self.connections.remove(conn)
        with contextlib.suppress(Exception):
            await conn.disconnect()

    async def _read_group(self, name: str, on_messages: MessagesCallback) -> None:
        """Streams: read the cell's group as consumer `name`, each batch acknowledged with the next read."""
        conn = await self.connect(name)
        await _held_if(conn, _call(conn, "PING"))  # connected and answering before the producers start
        self.connections.append(conn)
        self._watched = conn

        def hand_over(entries: list[tuple[bytes, bytes]]) -> None:
            on_messages(_Batch([p for _, p in entries], [entry_offset(i) for i, _ in entries]))

        async def loop(conn: Connection) -> None:
            while not self.closing:
                try:
                    await rc.read_group_batches(
                        conn, self.key, self.group, name, self.cell.client, hand_over, self._on_arrival
                    )
                except (ConnectionError, OSError, RedisConnectionError) as exc:
                    if self.closing:
                        return
                    self.errors.error("connection_lost", f"{type(exc).__name__}: {exc}")
                except ResponseError as exc:  # NOGROUP after a restart without persistence: counted, retried
                    self.errors.error("reply_error", f"{type(exc).__name__}: {exc}")
                    await asyncio.sleep(RECONNECT_PAUSE_S)
                    continue
                await self._forget(conn)
                conn = await self._again(lambda: self.connect(name))
                self.connections.append(conn)
                self._watched = conn

        self._spawn(loop(conn))

    async def _again(self, opener: Callable[[], Any]) -> Any:
        """Open again, a pause apart, until it works (or the driver closes: then the task is cancelled)."""
        while True:
            await asyncio.sleep(RECONNECT_PAUSE_S)
            try:
                return await opener()
            except (BrokerError, RedisError, OSError) as exc:
                self.errors.error("reconnect_failed", str(exc))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def backlog(self) -> int | None:
        """Messages the consumer's (or responder's) connection holds unparsed: bytes read but not yet parsed by
        hiredis, in the stream reader, and unread in the socket, over the size of one framed message."""
        conn = self._watched
        if conn is None:
            return None
        unread = _unread_bytes(conn)
        if unread is None:
            return None
        return unread // (self.cell.workload.message_size_bytes + _FRAMING)

    async def close(self) -> None:
        self.closing = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for sender in self.senders:
            with contextlib.suppress(Exception):
                await sender.close()
        for conn in self.connections:
            with contextlib.suppress(Exception):
                await conn.disconnect()
        self.senders.clear()
        self.connections.clear()
        self._watched = None


def _payloads(pushes: list[Any]) -> list[bytes]:
    """The payloads of the `message` pushes among what one read completed."""
    return [push[2] for push in pushes if push[0] == b"message"]


async def _held_if(conn: Connection, answered: Any) -> None:
    """Await a connection's first control call (`answered`); if it fails, the connection is closed before the
    error goes on, so a connection nobody will hold is never left open."""
    try:
        await answered
    except BaseException:
        with contextlib.suppress(Exception):
            await conn.disconnect()
        raise


async def _call(conn: Connection, *command: Any) -> Any:
    """One command on a control connection, its reply awaited at most `client.CONTROL_TIMEOUT_S` (never on a
    measured path)."""
    name = " ".join(map(str, command[:2]))
    async with rc.answered(name):
        await conn.send_command(*command)
        try:
            return await conn.read_response()
        except ResponseError as exc:
            raise BrokerError(f"Redis refused {name}: {exc}") from None


def _unread_bytes(conn: Connection) -> int | None:
    try:
        parser = conn._parser._reader
        stream = conn._reader
        sock = conn._writer.get_extra_info("socket")
        queued = int.from_bytes(fcntl.ioctl(sock.fileno(), termios.FIONREAD, bytes(4)), "little")
        return parser.len() + len(stream._buffer) + queued
    except Exception:  # closed or reconnecting
        return None
