"""Request/reply through the broker for rtt cells: each request is published with RabbitMQ's direct reply-to, and
its reply comes back on the requester's own channel (no queue per requester)."""

from __future__ import annotations

import asyncio
from typing import Any

import pika

from .connection import call, write_now

REPLY_TO = "amq.rabbitmq.reply-to"  # RabbitMQ's direct reply-to pseudo-queue: no queue per requester


class Replies:
    """The replies of one synchronous rtt channel, through direct reply-to; each request has its own correlation
    id, so a reply that comes after its request timed out is recognised and dropped."""

    def __init__(self, channel: Any):
        self.channel = channel
        self.count = 0
        self.expected = ""
        self.waiting: asyncio.Future[None] | None = None

    @classmethod
    async def open(cls, channel: Any) -> Replies:
        replies = cls(channel)
        await call(lambda cb: channel.basic_consume(REPLY_TO, replies.deliver, auto_ack=True, callback=cb))
        return replies

    def deliver(self, _ch: Any, _method: Any, properties: Any, _body: bytes) -> None:
        waiting = self.waiting
        if waiting is not None and not waiting.done() and properties.correlation_id == self.expected:
            waiting.set_result(None)

    async def request(self, exchange: str, key: str, payload: bytes, base: Any, timeout_s: float) -> None:
        self.count += 1
        self.expected = str(self.count)
        props = pika.BasicProperties(
            delivery_mode=base.delivery_mode, headers=base.headers, reply_to=REPLY_TO, correlation_id=self.expected
        )
        self.waiting = waiting = asyncio.get_running_loop().create_future()
        try:
            self.channel.basic_publish(exchange, key, payload, props)
            write_now(self.channel.connection)
            await asyncio.wait_for(waiting, timeout_s)
        finally:
            self.waiting = None
