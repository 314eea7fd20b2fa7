"""One NATS Streaming subscription: opened on its own inbox, its deliveries handed on and acked, its end
(unsubscribe or close) asked of the server, and stopped cleanly when the connection is lost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from nats.aio.msg import Msg

from . import protocol as pb
from .requests import ServerSubjects, StanError, SubscriptionOptions, stan_request, subscription_request

MessageCallback = Callable[[Any], None]  # a decoded pb.MsgProto: sequence, subject, data, timestamp, redelivered


class SubscriptionOwner(Protocol):
    """What a subscription asks of its streaming connection (`client.StanConnection` is one)."""

    nc: Any
    client_id: str
    subjects: ServerSubjects
    request_timeout_s: float
    subscriptions: set[Any]

    def acks_not_sent(self, count: int, why: str) -> None: ...


class StanSubscription:
    """One subscription: deliveries go to `on_message`, then (unless manual) their Ack goes to the server."""

    def __init__(self, conn: SubscriptionOwner, subject: str, on_message: MessageCallback, opts: SubscriptionOptions):
        self.conn = conn
        self.subject = subject
        self.on_message = on_message
        self.opts = opts
        self.inbox = conn.nc.new_inbox()
        self.ack_inbox = ""
        self._ready = asyncio.Event()
        self._inbox_sub: Any = None

    async def open_inbox(self) -> Any:
        """Subscribe the inbox the server delivers to (a subclass may deliver differently, e.g. in batches)."""
        return await self.conn.nc.subscribe(self.inbox, cb=self._deliver, pending_msgs_limit=0, pending_bytes_limit=0)

    async def start(self) -> StanSubscription:
        c = self.conn
        self._inbox_sub = await self.open_inbox()
        req = subscription_request(c.client_id, self.subject, self.inbox, self.opts)
        try:
            data = await stan_request(
                c.nc, c.subjects.sub_requests, req, c.request_timeout_s, f"subscribe {self.subject}"
            )
        except StanError:
            await self._inbox_sub.unsubscribe()
            close = pb.UnsubscribeRequest(clientID=c.client_id, subject=self.subject, inbox=self.inbox)
            await c.nc.publish(c.subjects.sub_close_requests, close.SerializeToString())  # in case it got there
            raise
        resp = pb.SubscriptionResponse.FromString(data)
        if resp.error:
            await self._inbox_sub.unsubscribe()
            raise StanError(f"subscribe {self.subject}: {resp.error}")
        self.ack_inbox = resp.ackInbox
        self._ready.set()
        self.on_ready()
        return self

    def on_ready(self) -> None:
        """Called once the server accepted the subscription (its ack inbox is known)."""

    @property
    def ready(self) -> bool:
        return self._ready.is_set()

    async def _deliver(self, msg: Msg) -> None:
        if not self._ready.is_set():  # a delivery read in the same buffer as the subscription's answer
            await self._ready.wait()
        m = pb.MsgProto.FromString(msg.data)
        self.on_message(m)
        if not self.opts.manual_acks:
            try:
                await self.ack(m)
            except StanError as exc:
                self.conn.acks_not_sent(1, str(exc))

    async def ack(self, m: Any) -> None:
        """Acknowledge one delivery (manual acks; automatic ones are sent after `on_message`). Raises StanError
        when the Ack cannot be handed to the NATS connection (closed, or its reconnect buffer full)."""
        ack = pb.Ack(subject=m.subject, sequence=m.sequence).SerializeToString()
        try:
            await self.conn.nc.publish(self.ack_inbox, ack)
        except Exception as exc:
            raise StanError(f"Ack of {m.subject} #{m.sequence} not sent: {type(exc).__name__}: {exc}") from None

    async def unsubscribe(self) -> None:
        """End the subscription; a durable one is forgotten by the server."""
        await self._end(self.conn.subjects.unsub_requests, "unsubscribe")

    async def close(self) -> None:
        """Stop deliveries; a durable one keeps its position on the server for a later subscription."""
        await self._end(self.conn.subjects.sub_close_requests, "close subscription")

    async def stop_deliveries(self) -> None:
        """Stop reading the inbox (the server is told separately, or not at all when the connection closes). A
        closed NATS connection reads nothing any more: there is nothing to unsubscribe."""
        if self._inbox_sub is not None:
            sub, self._inbox_sub = self._inbox_sub, None
            nc = self.conn.nc
            getattr(nc, "direct", {}).pop(getattr(sub, "_id", None), None)
            if not nc.is_closed:
                await sub.unsubscribe()

    async def _end(self, subject: str, what: str) -> None:
        c = self.conn
        await self.stop_deliveries()
        c.subscriptions.discard(self)
        req = pb.UnsubscribeRequest(clientID=c.client_id, subject=self.subject, inbox=self.ack_inbox)
        data = await stan_request(c.nc, subject, req, c.request_timeout_s, f"{what} {self.subject}")
        resp = pb.SubscriptionResponse.FromString(data)
        if resp.error:
            raise StanError(f"{what} {self.subject}: {resp.error}")
