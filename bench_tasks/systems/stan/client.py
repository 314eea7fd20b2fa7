"""A small client of the NATS Streaming protocol over a nats-py connection (asyncio).

What it speaks, as stan.go does: connect (a ConnectRequest to `_STAN.discover.<cluster id>`, answering the
server's heartbeats and sending protocol-1 PINGs), publish (a PubMsg to `<pubPrefix>.<subject>` whose PubAck
comes back on the connection's ack inbox), subscribe (a SubscriptionRequest with durable name, queue group, start
position, max in flight and ack wait; deliveries are MsgProto on the subscription's inbox, acknowledged with an
Ack on the inbox the server named), unsubscribe / close of a subscription, and close of the connection.

It never reads a clock to time messages and never waits on the server before a publish returns (the generator
owns timing, STYLE 1): a publish hands the message to nats-py and returns; its PubAck calls the callback given
with it. A full window of unacknowledged publishes fails the publish at once (`PublishWindowFull`), where stan.go
would block. The clock it takes is for ack timeouts and pings only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.nuid import NUID

from . import protocol as pb
from .requests import (
    ACK_PREFIX,
    DISCOVER_PREFIX,
    PublishWindowFull,
    ServerSubjects,
    StanError,
    SubscriptionOptions,
    stan_request,
    subscribe_inbox,
)
from .subscription import MessageCallback, StanSubscription

_CLIENT_ID = re.compile(r"^[A-Za-z0-9_-]+$")

AckCallback = Callable[[str | None], None]  # None: acknowledged; otherwise why not
LostCallback = Callable[[str], None]
AcksNotSentCallback = Callable[[str], None]  # why a subscription's Acks could not be sent to the server


class StanConnection:
    """One streaming connection on a nats-py connection (owned: closed with it, or shared: left open)."""

    def __init__(
        self,
        nc: Client,
        client_id: str,
        subjects: ServerSubjects,
        conn_id: bytes,
        *,
        owns_nc: bool,
        max_pub_acks_in_flight: int,
        pub_ack_wait_s: float,
        request_timeout_s: float,
        on_lost: LostCallback | None,
        on_acks_not_sent: AcksNotSentCallback | None = None,
        clock: Callable[[], float],
    ):
        self.nc = nc
        self.client_id = client_id
        self.subjects = subjects
        self.conn_id = conn_id
        self.owns_nc = owns_nc
        self.max_pub_acks_in_flight = max_pub_acks_in_flight
        self.pub_ack_wait_s = pub_ack_wait_s
        self.request_timeout_s = request_timeout_s
        self.on_lost = on_lost
        self.on_acks_not_sent = on_acks_not_sent
        self.acks_not_sent_count = 0  # deliveries whose Ack never left: the server delivers them again
        self.clock = clock
        self.ack_inbox = f"{ACK_PREFIX}.{NUID().next().decode()}"
        self.subscriptions: set[StanSubscription] = set()
        self.lost: str | None = None
        self.closed = False
        # A PubMsg's guid only has to be unique (the server echoes it in the PubAck): one random NUID per
        # connection and a counter, ~0.3 µs where a NUID per message costs ~1.9 µs.
        self._guid_prefix = NUID().next().decode()
        self._sent = itertools.count(1)
        self._pending: dict[str, tuple[AckCallback, float]] = {}  # guid -> (callback, deadline), oldest first
        self._pub_subjects: dict[str, str] = {}
        self._subs: list[Any] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._pings_out = 0

    @property
    def pending_acks(self) -> int:
        return len(self._pending)

    # -- publishing -----------------------------------------------------------------------------------------------
    async def publish(self, subject: str, data: bytes, on_ack: AckCallback) -> str:
        """Send one message; `on_ack(None)` once stored, `on_ack(reason)` on an error, a timeout or a lost
        connection. Returns the message's guid. Never waits for the server."""
        if self.closed or self.lost is not None:
            raise StanError(f"the streaming connection is {'closed' if self.lost is None else f'lost: {self.lost}'}")
        if len(self._pending) >= self.max_pub_acks_in_flight:
            raise PublishWindowFull(f"{len(self._pending)} publishes wait for their PubAck (max_pub_acks_in_flight)")
        guid = f"{self._guid_prefix}{next(self._sent)}"
        msg = pb.PubMsg(clientID=self.client_id, guid=guid, subject=subject, data=data, connID=self.conn_id)
        target = self._pub_subjects.get(subject) or self._pub_subject(subject)
        self._pending[guid] = (on_ack, self.clock() + self.pub_ack_wait_s)
        try:
            await self.nc.publish(target, msg.SerializeToString(), reply=self.ack_inbox)
        except Exception:
            self._pending.pop(guid, None)
            raise
        return guid

    async def publish_batch(
        self, subject: str, messages: Iterable[tuple[Any, bytes]], on_ack: Callable[[Any, str | None], None]
    ) -> dict[Any, str]:
        """Send every message of `messages` ((key, data), each pulled only when it is about to be framed) and,
        on the harness's own nats-py client while connected, write them all to the socket in one call.
        `on_ack(key, None)` once a message is stored, `on_ack(key, reason)` when it failed after being sent.
        Returns the messages not sent at all, {key: why}: a lost or closed connection, a full PubAck window,
        a message over the server's max_payload. Never waits for the server."""
        if self.closed or self.lost is not None:
            why = "StreamingConnectionClosed" if self.lost is None else "StreamingConnectionLost"
            return {key: why for key, _data in messages}
        nc, refused = self.nc, {}
        write = getattr(nc, "write_publishes", None) if nc.is_connected else None
        target, reply = self._pub_subjects.get(subject) or self._pub_subject(subject), self.ack_inbox
        deadline, pending, client_id, conn_id = (
            self.clock() + self.pub_ack_wait_s,
            self._pending,
            self.client_id,
            self.conn_id,
        )
        framed: list[tuple[str, str, bytes]] = []
        for key, data in messages:
            if len(pending) >= self.max_pub_acks_in_flight:
                refused[key] = "PublishWindowFull"
                continue
            guid = f"{self._guid_prefix}{next(self._sent)}"
            body = pb.PubMsg(clientID=client_id, guid=guid, subject=subject, data=data, connID=conn_id)
            body = body.SerializeToString()
            if len(body) > nc.max_payload:
                refused[key] = "MaxPayloadError"
                continue
            pending[guid] = (functools.partial(on_ack, key), deadline)
            if write is not None:
                framed.append((target, reply, body))
                continue
            try:  # reconnecting, or a plain nats-py client: it buffers
                await nc.publish(target, body, reply=reply)
            except Exception as exc:
                pending.pop(guid, None)
                refused[key] = type(exc).__name__
        if framed:
            write(framed)
        return refused

    def _pub_subject(self, subject: str) -> str:
        self._pub_subjects[subject] = f"{self.subjects.pub_prefix}.{subject}"
        return self._pub_subjects[subject]

    async def publish_and_wait(self, subject: str, data: bytes) -> None:
        """Publish and wait for the PubAck (set-up and tests; a benchmark's sends never wait)."""
        done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        await self.publish(subject, data, lambda error: done.done() or done.set_result(error))
        error = await done
        if error is not None:
            raise StanError(f"publish to {subject}: {error}")

    def _on_pub_ack(self, data: bytes, _reply: bytes) -> None:
        ack = pb.PubAck.FromString(data)
        entry = self._pending.pop(ack.guid, None)
        if entry is not None:
            entry[0](ack.error or None)

    async def wait_for_acks(self, timeout_s: float) -> int:
        """Wait until every publish has its PubAck (or failed), at most `timeout_s`; returns how many still wait."""
        deadline = self.clock() + timeout_s
        while self._pending and self.clock() < deadline:
            await asyncio.sleep(0.01)
        return len(self._pending)

    async def _expire_acks(self) -> None:
        """Fail publishes whose PubAck is overdue; they were queued oldest first, so only the front is looked at."""
        period = min(1.0, self.pub_ack_wait_s / 4)
        while True:
            await asyncio.sleep(period)
            now = self.clock()
            while self._pending:
                guid = next(iter(self._pending))
                callback, deadline = self._pending[guid]
                if deadline > now:
                    break
                del self._pending[guid]
                callback(f"no PubAck within {self.pub_ack_wait_s:g} s")

    def _fail_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for callback, _ in pending.values():
            callback(reason)

    # -- subscribing ------------------------------------------------------------------------------------------------
    async def subscribe(
        self,
        subject: str,
        on_message: MessageCallback,
        opts: SubscriptionOptions | None = None,
        kind: type[StanSubscription] = StanSubscription,
    ) -> StanSubscription:
        """`kind`: the subscription class (the driver's hands deliveries over in batches)."""
        sub = await kind(self, subject, on_message, opts or SubscriptionOptions()).start()
        self.subscriptions.add(sub)
        return sub

    def acks_not_sent(self, count: int, why: str) -> None:
        """`count` Acks of this connection's subscriptions could not be sent: counted, and told to
        `on_acks_not_sent` (those messages come again once their ack wait is over, as redeliveries)."""
        self.acks_not_sent_count += count
        if self.on_acks_not_sent is not None:
            self.on_acks_not_sent(why)

    # -- liveness ---------------------------------------------------------------------------------------------------
    async def _on_heartbeat(self, msg: Msg) -> None:
        if msg.reply:
            await self.nc.publish(msg.reply, b"")

    async def _ping(self, inbox: str) -> None:
        """Protocol 1: PING the server; `ping_max_out` unanswered in a row means the connection is lost."""
        ping = pb.Ping(connID=self.conn_id).SerializeToString()
        while True:
            await asyncio.sleep(self.subjects.ping_interval_s)
            self._pings_out += 1
            if self._pings_out > self.subjects.ping_max_out:
                self._lose(f"{self.subjects.ping_max_out} PINGs unanswered")
                return
            with contextlib.suppress(Exception):  # a reconnecting nats-py connection: the count decides
                await self.nc.publish(self.subjects.ping_requests, ping, reply=inbox)

    async def _on_pong(self, msg: Msg) -> None:
        if msg.data:
            error = pb.PingResponse.FromString(msg.data).error
            if error:
                self._lose(error)  # e.g. the server no longer knows this client (a restarted memory store)
                return
        self._pings_out = 0

    def nats_closed(self) -> None:
        """Its NATS connection closed for good (nats-py gave up reconnecting, or it was closed under this one): the
        streaming connection is lost, unless it was being closed itself."""
        if not self.closed:
            self._lose("its NATS connection closed")

    def _lose(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
            self._fail_pending(f"connection lost: {reason}")
            if self.on_lost is not None:
                self.on_lost(reason)

    async def start(self, heartbeat_inbox: str, ping_inbox: str) -> None:
        nc = self.nc
        self._subs.append(await nc.subscribe(heartbeat_inbox, cb=self._on_heartbeat))
        self._subs.append(await subscribe_inbox(nc, self.ack_inbox, self._on_pub_ack))
        self._tasks.append(asyncio.create_task(self._expire_acks()))
        if self.subjects.protocol >= pb.PROTOCOL_ONE and self.subjects.ping_interval_s > 0:
            self._subs.append(await nc.subscribe(ping_inbox, cb=self._on_pong))
            self._tasks.append(asyncio.create_task(self._ping(ping_inbox)))

    # -- closing ----------------------------------------------------------------------------------------------------
    async def close(self) -> None:
        """Close the streaming connection (durable subscriptions stay on the server); publishes still waiting for
        a PubAck fail with "connection closed". Wait with `wait_for_acks` first to keep them."""
        for task in self._tasks:
            task.cancel()
        self._fail_pending("connection closed")
        self.closed = True
        for sub in [*self.subscriptions]:
            await sub.stop_deliveries()
        self.subscriptions.clear()
        try:
            if self.lost is None and self.nc.is_connected:  # reconnecting: no answer would come in time
                req = pb.CloseRequest(clientID=self.client_id)
                data = await stan_request(self.nc, self.subjects.close_requests, req, self.request_timeout_s, "close")
                error = pb.CloseResponse.FromString(data).error
                if error:
                    raise StanError(f"close: {error}")
        finally:
            for sub in self._subs:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
            if self.owns_nc:
                await self.nc.close()


async def connect(
    nc: Client,
    cluster_id: str,
    client_id: str,
    *,
    owns_nc: bool = False,
    connect_timeout_s: float = 2.0,
    max_pub_acks_in_flight: int = 16384,
    pub_ack_wait_s: float = 30.0,
    ping_interval_s: int = 5,
    ping_max_out: int = 88,
    on_lost: LostCallback | None = None,
    on_acks_not_sent: AcksNotSentCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> StanConnection:
    """Open a streaming connection as `client_id` on a connected nats-py client (defaults are stan.go's).
    `on_lost(why)`: the connection was lost; `on_acks_not_sent(why)`: Acks of its subscriptions could not be
    sent (automatic ones; a manual `ack` raises instead)."""
    if not _CLIENT_ID.match(client_id):
        raise StanError(f"client id {client_id!r}: use letters, digits, '-' and '_' only (the server's rule)")
    heartbeat_inbox, ping_inbox = nc.new_inbox(), nc.new_inbox()
    conn_id = NUID().next()
    req = pb.ConnectRequest(
        clientID=client_id,
        heartbeatInbox=heartbeat_inbox,
        protocol=pb.PROTOCOL_ONE,
        connID=bytes(conn_id),
        pingInterval=ping_interval_s,
        pingMaxOut=ping_max_out,
    )
    subject = f"{DISCOVER_PREFIX}.{cluster_id}"
    data = await stan_request(nc, subject, req, connect_timeout_s, f"connect to cluster {cluster_id!r}")
    subjects = ServerSubjects.from_response(pb.ConnectResponse.FromString(data))
    conn = StanConnection(
        nc,
        client_id,
        subjects,
        bytes(conn_id),
        owns_nc=owns_nc,
        max_pub_acks_in_flight=max_pub_acks_in_flight,
        pub_ack_wait_s=pub_ack_wait_s,
        request_timeout_s=connect_timeout_s,
        on_lost=on_lost,
        on_acks_not_sent=on_acks_not_sent,
        clock=clock,
    )
    await conn.start(heartbeat_inbox, ping_inbox)
    return conn
