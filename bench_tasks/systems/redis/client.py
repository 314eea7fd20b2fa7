"""The Redis client plumbing the driver is built from: redis-py asyncio connections with the hiredis parser.

One redis-py `Connection` per producer connection (no pool: a pool would pick connections per command and hide
which socket a message took). Sending is open loop: `ReplyPipe` writes each command (or a batch of them) without
waiting for its reply, and one reader task per connection hands every reply, in order (RESP replies come in the
order of the commands), to the callback that came with its command. A reply is a PUBLISH's subscriber count or
an XADD's entry id; an error reply goes to the same callback as text, and a lost connection fails every command
still waiting. Subscribers read `message` pushes off a subscribed connection; group readers loop XREADGROUP and
acknowledge each read batch with XACK written together with the next read.

Nothing here reads a clock or decides when to send (STYLE 1): that is the generator's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

from redis._parsers.hiredis import NOT_ENOUGH_DATA
from redis.asyncio.connection import Connection, parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.utils import HIREDIS_AVAILABLE

from ...errors import BrokerError
from .settings import RedisClient

# on_reply(reply, error): the command's reply, or None and the error text.
ReplyCallback = Callable[[Any, str | None], None]
# on_message(payload, entry_id): one received message (entry_id: the stream entry id, None for pub/sub).
MessageCallback = Callable[[bytes, bytes | None], None]
Command = Sequence[str | bytes | int]

PAYLOAD_FIELD = b"d"  # the one field of every stream entry the harness writes
# Harness defaults under the matrix's `connect` map. No socket timeout: a send must never wait on the server,
# and with one redis-py wraps every write in asyncio.wait_for (a task per message); a stalled server is what the
# generator measures, not a client error. Connecting still fails fast.
CONNECT_DEFAULTS: dict[str, Any] = {"socket_timeout": None, "socket_connect_timeout": 5.0}
# RESP2, whatever redis-py's default (RESP3 since 8.0): subscription messages and XREADGROUP replies are read as
# plain arrays here, and RESP2 is what both servers speak to a client that does not ask.
PROTOCOL = 2
# How long a control call waits for the server: the connection's handshake, a route's set-up and removal, a
# subscription's confirmation, a reader's first PING. Never on the measured path (no socket timeout there, above):
# a stalled server must fail a cell's set-up or teardown, naming the call, rather than hold it for ever.
CONTROL_TIMEOUT_S = 10.0


def connection_kwargs(url: str, client: RedisClient, name: str, access: Mapping[str, Any] | None = None) -> dict:
    """redis-py Connection kwargs: the URL's address and credentials, `access` (an external server's user,
    password, CA), the harness defaults, then the matrix's `client.connect` on top."""
    kwargs = {**parse_url(url), **CONNECT_DEFAULTS, "client_name": name}
    kwargs.update(access or {})
    kwargs.update(client.connect)
    kwargs["protocol"] = PROTOCOL
    return kwargs


async def connect(url: str, client: RedisClient, name: str, access: Mapping[str, Any] | None = None) -> Connection:
    """One connected redis-py connection with the hiredis reply parser (refused without it: the parser is part
    of the client under test, and the pure-Python one is several times slower)."""
    if not HIREDIS_AVAILABLE:
        raise BrokerError("redis-py cannot load hiredis; install the locked `hiredis` (make venv)")
    kwargs = connection_kwargs(url, client, name, access)
    connection_class = kwargs.pop("connection_class", Connection)
    conn = connection_class(**kwargs)
    try:
        async with answered(f"connect to {url}"):  # the handshake (CLIENT SETNAME, AUTH) waits for replies
            await conn.connect()
    except (OSError, RedisConnectionError) as exc:
        await conn.disconnect()
        raise BrokerError(f"cannot connect to Redis at {url}: {exc}") from None
    except BrokerError:
        await conn.disconnect()  # connected but never answered: the socket is not left open
        raise
    return conn


@contextlib.asynccontextmanager
async def answered(what: str) -> AsyncIterator[None]:
    """Wait for a control call's answer at most `CONTROL_TIMEOUT_S`; a BrokerError naming `what` if none came."""
    timeout_s = CONTROL_TIMEOUT_S
    try:
        async with asyncio.timeout(timeout_s):
            yield
    except TimeoutError:
        raise BrokerError(f"Redis {what}: no answer within {timeout_s:g} s (is the server stalled?)") from None


def publish_command(channel: str, payload: bytes) -> Command:
    return ("PUBLISH", channel, payload)


def xadd_command(stream: str, payload: bytes, maxlen: int | None) -> Command:
    """XADD with an auto id; `MAXLEN ~ N` lets Redis trim whole nodes, the cheap approximate trim."""
    trim: tuple[str | int, ...] = ("MAXLEN", "~", maxlen) if maxlen is not None else ()
    return ("XADD", stream, *trim, "*", PAYLOAD_FIELD, payload)


def group_create_command(stream: str, group: str) -> Command:
    """The consumer group, reading only entries added from now on (`$`), creating the stream if needed."""
    return ("XGROUP", "CREATE", stream, group, "$", "MKSTREAM")


def xreadgroup_command(stream: str, group: str, consumer: str, client: RedisClient) -> Command:
    noack: tuple[str, ...] = ("NOACK",) if client.noack else ()
    limits = ("COUNT", client.read_count, "BLOCK", client.block_ms, *noack)
    return ("XREADGROUP", "GROUP", group, consumer, *limits, "STREAMS", stream, ">")


def xack_command(stream: str, group: str, entry_ids: Sequence[bytes]) -> Command:
    return ("XACK", stream, group, *entry_ids)


def entries_of(reply: Any) -> list[tuple[bytes, bytes]]:
    """(entry id, payload) of every entry in an XREADGROUP reply (None when BLOCK ran out)."""
    if not reply:
        return []
    _stream, entries = reply[0]
    return [(entry_id, _payload_of(fields)) for entry_id, fields in entries]


def _payload_of(fields: Sequence[bytes]) -> bytes:
    for key, value in zip(fields[::2], fields[1::2], strict=True):
        if key == PAYLOAD_FIELD:
            return value
    raise BrokerError(f"a stream entry without the {PAYLOAD_FIELD!r} field: {list(fields[::2])}")


class ReplyPipe:
    """Commands written on one connection without waiting; replies handed to their callbacks in order."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self._waiting: deque[ReplyCallback] = deque()
        self._failed: str | None = None
        self._reader = asyncio.get_running_loop().create_task(self._read_replies())

    @property
    def in_flight(self) -> int:
        """Commands written whose replies have not arrived: the client-side backlog."""
        return len(self._waiting)

    async def send(self, command: Command, on_reply: ReplyCallback) -> None:
        await self.send_many([command], [on_reply])

    async def send_many(self, commands: Sequence[Command], on_replies: Sequence[ReplyCallback]) -> None:
        """Write every command in one go (one write, and a drain only when the socket buffer is full)."""
        if self._failed is not None:
            for on_reply in on_replies:
                on_reply(None, self._failed)
            return
        self._waiting.extend(on_replies)
        try:
            await self.conn.send_packed_command(self.conn.pack_commands(commands), check_health=False)
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            self._fail(f"{type(exc).__name__}: {exc}")

    async def _read_replies(self) -> None:
        while True:
            try:
                reply = await self.conn.read_response(timeout=math.inf)
            except ResponseError as exc:  # redis-py maps the error code to the class (READONLY: ReadOnlyError)
                self._waiting.popleft()(None, f"{type(exc).__name__}: {exc}")
                continue
            except (RedisConnectionError, OSError) as exc:
                self._fail(f"{type(exc).__name__}: {exc}")
                return
            self._waiting.popleft()(reply, None)

    def _fail(self, reason: str) -> None:
        """The connection is gone: every command still waiting, and every later one, fails with `reason`."""
        self._failed = reason
        while self._waiting:
            self._waiting.popleft()(None, reason)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.conn.disconnect()


async def subscribe(conn: Connection, channels: Sequence[str], pattern: bool = False) -> None:
    """SUBSCRIBE (PSUBSCRIBE to patterns) and return once the server confirmed every channel (from then on, nothing
    published is missed)."""
    command, confirmed = ("PSUBSCRIBE", b"psubscribe") if pattern else ("SUBSCRIBE", b"subscribe")
    async with answered(command):
        await conn.send_command(command, *channels)
        for _ in channels:
            reply = await conn.read_response(timeout=math.inf)
            if isinstance(reply, ResponseError) or reply[0] != confirmed:
                raise BrokerError(f"{command} answered {reply!r}")


async def read_replies(conn: Connection, on_arrival: Callable[[], None] | None = None) -> list[Any]:
    """Every reply (or push) the connection has complete, reading the socket once if it has none: one hand-over
    per read, not one await per message. `on_arrival()` is called when bytes reach the process, before hiredis
    parses them. An error reply comes back as its exception, not raised. This drives redis-py's hiredis reader and
    stream reader directly (`Connection._parser._reader`, `Connection._reader`; redis and hiredis are pinned, and
    the integration tests receive through this path)."""
    reader = conn._parser._reader
    replies: list[Any] = []
    while True:
        reply = reader.gets()
        while reply is not NOT_ENOUGH_DATA:
            replies.append(reply)
            reply = reader.gets()
        if replies:
            return replies
        data = await conn._reader.read(conn._parser._read_size)
        if not data:
            raise RedisConnectionError("Connection closed by server.")
        if on_arrival is not None:
            on_arrival()
        reader.feed(data)


async def read_messages(conn: Connection, on_message: MessageCallback) -> None:
    """Hand the payload of every `message` push on a subscribed connection to `on_message`, until it closes."""
    while True:
        push = await conn.read_response(timeout=math.inf)
        if push[0] == b"message":
            on_message(push[2], None)


async def read_group(
    conn: Connection, stream: str, group: str, consumer: str, client: RedisClient, on_message: MessageCallback
) -> None:
    """Loop XREADGROUP for `consumer` of `group`, handing every entry to `on_message`; each batch read is
    acknowledged (XACK) in the same write as the next read, unless the client reads with NOACK."""
    read = xreadgroup_command(stream, group, consumer, client)
    acked: list[bytes] = []
    while True:
        commands = [xack_command(stream, group, acked), read] if acked else [read]
        await conn.send_packed_command(conn.pack_commands(commands), check_health=False)
        if acked:
            await conn.read_response(timeout=math.inf)  # XACK's count
        entries = entries_of(await conn.read_response(timeout=math.inf))
        for entry_id, payload in entries:
            on_message(payload, entry_id)
        acked = [] if client.noack else [entry_id for entry_id, _ in entries]


async def read_group_batches(
    conn: Connection,
    stream: str,
    group: str,
    consumer: str,
    client: RedisClient,
    on_entries: Callable[[list[tuple[bytes, bytes]]], None],
    on_arrival: Callable[[], None] | None = None,
) -> None:
    """Loop XREADGROUP for `consumer` of `group`, handing each read's entries to `on_entries` at once; each batch
    is acknowledged (XACK) in the same write as the next read, unless the client reads with NOACK. An error reply
    (NOGROUP: the stream is gone) is raised as its exception."""
    read = xreadgroup_command(stream, group, consumer, client)
    acked: list[bytes] = []
    while True:
        commands = [xack_command(stream, group, acked), read] if acked else [read]
        await conn.send_packed_command(conn.pack_commands(commands), check_health=False)
        replies: list[Any] = []
        while len(replies) < len(commands):
            replies += await read_replies(conn, on_arrival)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
        entries = entries_of(replies[-1])
        if entries:
            on_entries(entries)
        acked = [] if client.noack else [entry_id for entry_id, _ in entries]
