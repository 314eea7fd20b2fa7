"""nats-py as the driver uses it: a connection that counts its errors, and a client subclass that hands a
subscription's raw messages straight to the harness (no Msg object per message), writes batches of publishes in
one go, tells when bytes arrive, and waits for request replies on one shared inbox."""

from __future__ import annotations

import asyncio
import fcntl
import ssl
import termios
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.subscription import Subscription
from nats.protocol.command import pub_cmd

from ...errors import BrokerError
from ...load.driver import ClientErrors, Outgoing
from .cluster import servers_of
from .settings import NatsCell

# Connection defaults a benchmark wants: fail fast at start, keep reconnecting quietly during a fault,
# and a large outbound buffer so a short stall does not turn into publish errors.
CONNECT_DEFAULTS: dict[str, Any] = {
    "connect_timeout": 5,
    "max_reconnect_attempts": 5,
    "reconnect_time_wait": 0.5,
    "pending_size": 64 * 1024 * 1024,
    "skip_subject_validation": True,  # the harness's subjects are valid by construction; checks cost per publish
}


# A direct handler: (subject, reply, payload, headers) as the parser read them; may return an awaitable.
Direct = Callable[[bytes, bytes, bytes, bytes | None], Awaitable[None] | None]


async def connect(
    url: str,
    cell: NatsCell,
    name: str,
    client: Mapping[str, Any] | None = None,
    on_arrival: Callable[[], None] | None = None,
    errors: ClientErrors | None = None,
) -> Client:
    """`client`: connection settings of external servers (user/password or token; `tls_ca_file` becomes a TLS
    context that trusts that CA), under the matrix's own `client.connect`. `on_arrival`: see `DirectClient`.
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
    nc = DirectClient()
    options = {
        **CONNECT_DEFAULTS,
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


class DirectClient(Client):
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


def direct_client(nc: Client) -> DirectClient:
    if not isinstance(nc, DirectClient):
        raise BrokerError("direct delivery needs the harness's own nats-py client (drivers.nats.connect)")
    return nc


class Replies:
    """The replies of one synchronous rtt connection, on an inbox delivered straight from the parser.

    Each request gets its own reply subject (`<inbox>.<n>`), so a reply that comes after its request timed
    out is recognised and dropped instead of answering the next one. A reply with headers is the server's
    status (503: no responders) and fails the request."""

    def __init__(self, nc: DirectClient, inbox: str):
        self.nc, self.inbox = nc, inbox
        self.count = 0
        self.expected = b""
        self.waiting: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, nc: DirectClient) -> Replies:
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
