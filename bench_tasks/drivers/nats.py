"""NATS driver on nats-py: core publish/subscribe, core request/reply, JetStream acked publish.

The driver only creates the stream, sends, and hands raw message bytes to a callback. It does not read
clocks: the generator stamps every timestamp itself (STYLE 1). Client options from the matrix
(`client.connect`) go to `nats.connect()` untouched, over the harness defaults.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping
from typing import Any

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig
from nats.js.client import JetStreamContext

from ..errors import BrokerError
from ..systems.nats.cluster import servers_of
from ..systems.nats.settings import NatsCell
from .base import AckCallback, MessageCallback

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
}


def subject_for(cell_id: str, route: str = "") -> str:
    return f"sixnines.{cell_id}" + (f".{route}" if route else "")


def stream_for(cell_id: str, route: str = "") -> str:
    return f"SIXNINES_{cell_id}" + (f"_{route}" if route else "")


async def connect(url: str, cell: NatsCell, name: str, client: Mapping[str, Any] | None = None) -> Client:
    """`client`: connection settings of external servers (user/password or token; `tls_ca_file` becomes a TLS
    context that trusts that CA), under the matrix's own `client.connect`."""

    async def quiet(_exc: Exception) -> None:  # errors surface as per-message results instead
        return None

    access = dict(client or {})
    ca_file = access.pop("tls_ca_file", None)
    if ca_file:
        access["tls"] = ssl.create_default_context(cafile=ca_file)
    options = {**_CONNECT_DEFAULTS, "name": name, "error_cb": quiet, **access, **cell.client.connect}
    # A cluster's address lists every node comma-separated; nats-py takes a list (it refuses a joined string).
    return await nats.connect(servers_of(url), **options)


class NatsDriver:
    """Everything a cell does against one NATS server, for one process."""

    def __init__(
        self, url: str, cell: NatsCell, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        self.url = url
        self.client = dict(client or {})
        self.cell = cell
        self.subject = subject_for(cell_id, route)
        self.stream = stream_for(cell_id, route)
        self.jetstream = cell.broker.mode == "jetstream"
        self.acks = self.jetstream
        self.connections: list[Client] = []
        self._contexts: dict[int, JetStreamContext] = {}

    def js(self, nc: Client) -> JetStreamContext:
        """One JetStream context per connection: each context owns a reply subscription, so making one
        per message (as `nc.jetstream()` does on every call) leaks a subscription per message."""
        context = self._contexts.get(id(nc))
        if context is None:
            context = self._contexts[id(nc)] = nc.jetstream()
        return context

    async def open(self, name: str, count: int = 1) -> list[Client]:
        new = [await connect(self.url, self.cell, f"{name}-{i}", self.client) for i in range(count)]
        self.connections += new
        return new

    async def open_producer(self, name: str, connections: int) -> list[Client]:
        return await self.open(name, connections)

    async def open_consumer(self, name: str, on_message: MessageCallback, lagging: bool = False) -> None:
        if lagging:
            raise BrokerError("lagging consumers read a Kafka topic's backlog; NATS cells have none")
        (nc,) = await self.open(name)
        await self.subscribe(nc, on_message)
        await nc.flush()  # the subscription is registered at the server before we report ready

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        (nc,) = await self.open(name)
        await self.respond(nc, on_request)
        await nc.flush()

    async def prepare(self) -> None:
        """JetStream: a fresh stream for the cell (an old one of the same name is deleted first)."""
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

    async def cleanup(self) -> None:
        if not self.jetstream:
            return
        nc = self.connections[0] if self.connections else (await self.open("admin"))[0]
        with contextlib.suppress(TimeoutError, nats.js.errors.NotFoundError, nats.errors.Error):
            await self.js(nc).delete_stream(self.stream)

    async def send(self, nc: Client, payload: bytes, seq: int, on_ack: AckCallback, stream: int = 0) -> None:
        """Publish without waiting for the system. JetStream acks arrive later through `on_ack`."""
        if not self.jetstream:
            await nc.publish(self.subject, payload)
            return
        future = await self.js(nc).publish_async(self.subject, payload)

        def done(fut: asyncio.Future) -> None:
            if fut.cancelled():
                on_ack(seq, None, None, "cancelled")
            elif fut.exception() is not None:
                on_ack(seq, None, None, type(fut.exception()).__name__)
            else:
                on_ack(seq, STREAM_PARTITION, fut.result().seq, None)

        future.add_done_callback(done)

    async def request(self, nc: Client, payload: bytes, timeout_s: float) -> None:
        """Core request/reply; returns when the reply arrives (raises on timeout)."""
        await nc.request(self.subject, payload, timeout=timeout_s)

    async def subscribe(self, nc: Client, on_message: MessageCallback) -> None:
        """Join the cell's queue group (core) or its durable deliver group (JetStream, new messages only)."""
        if not self.jetstream:

            async def core_cb(msg: Msg) -> None:
                on_message(msg.data, None, None)

            await nc.subscribe(self.subject, queue=QUEUE_GROUP, cb=core_cb, pending_msgs_limit=0, pending_bytes_limit=0)
            return

        async def js_cb(msg: Msg) -> None:
            try:
                offset = msg.metadata.sequence.stream
            except Exception:
                offset = None
            on_message(msg.data, STREAM_PARTITION, offset)

        await self.js(nc).subscribe(
            self.subject,
            queue=QUEUE_GROUP,
            cb=js_cb,
            manual_ack=True,
            config=ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.NEW),
        )

    async def respond(self, nc: Client, on_request: Callable[[], None]) -> None:
        """rtt responder: echo each request's payload back to its reply subject."""

        async def echo(msg: Msg) -> None:
            await nc.publish(msg.reply, msg.data)
            on_request()

        await nc.subscribe(self.subject, queue=QUEUE_GROUP, cb=echo, pending_msgs_limit=0, pending_bytes_limit=0)

    async def close(self) -> None:
        for nc in self.connections:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), timeout=5)
        self.connections.clear()
        self._contexts.clear()
