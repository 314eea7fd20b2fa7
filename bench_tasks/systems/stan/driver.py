"""NATS Streaming driver: this package's streaming client (client.py) on the harness's own nats-py connection.

Every publish is acknowledged (PubAck, once the server stored the message), so `acks` is always on: a batch of
PubMsgs is framed as the generator pulls each message and written to the socket in one call
(`StanConnection.publish_batch`), and each PubAck reaches `on_ack` straight from nats-py's parser. A route is one
channel (`sixnines.<cell>[.<route>]`), created by the server on first use: there is nothing to prepare or delete.

The cell's consumers form one queue group (`sixnines`, durable when `client.durable`), so each message reaches one
of them, as NATS core and Kafka consumer groups do. Their deliveries go from the parser into a batch that is handed
to the generator once the parser has finished the bytes it read (one call per read, not per message); the driver
then acknowledges the batch itself (the subscription's manual acks), all Acks written in one call; Acks that cannot
be sent (the connection closed) are counted as client errors (`ack_failed`). What a consumer has not acknowledged
within `client.ack_wait_s` the server delivers again (marked redelivered; the harness counts a second receipt as a
duplicate). A lost connection (nats-py gave up reconnecting, or the server stopped answering PINGs or forgot the
client) is counted, closed and forgotten; nothing reconnects it. The driver never reads a clock (STYLE 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from ...errors import BrokerError
from ...load.driver import AckCallback, ClientErrors, MessagesCallback, Outgoing
from ..nats.client import DirectClient
from ..nats.client import connect as nats_connect
from . import client as stan
from . import protocol as pb
from .settings import StanCell

QUEUE_GROUP = "sixnines"
DURABLE_NAME = "sixnines"
CLOSE_TIMEOUT_S = 5.0
# Bytes one delivery adds to its payload on the wire (the MSG line with its inbox subject, the MsgProto's subject,
# sequence and timestamp): what turns a consumer's unread bytes into messages (`backlog`).
DELIVERY_OVERHEAD_BYTES = 120


def subject_for(cell_id: str, route: str = "") -> str:
    """The cell's channel (a route of its own per background workload)."""
    return f"sixnines.{cell_id}" + (f".{route}" if route else "")


def client_id_for(name: str) -> str:
    """A client id unique on the server: the worker's connection name (in the server's alphabet) and a random
    suffix, so a client of an earlier cell on a reused server, not yet timed out, never refuses this one."""
    return f"{re.sub(r'[^A-Za-z0-9_-]', '-', name)}-{secrets.token_hex(4)}"


def subscription_options(cell: StanCell) -> stan.SubscriptionOptions:
    """The cell's subscription: its queue group (durable or not), start position, flow and ack settings; acks are
    the driver's own (manual), sent after each batch is handed over."""
    c = cell.client
    return stan.SubscriptionOptions(
        queue=QUEUE_GROUP,
        durable=DURABLE_NAME if c.durable else "",
        max_in_flight=c.max_in_flight,
        ack_wait_s=c.ack_wait_s,
        start_position=c.start_position,
        start_sequence=c.start_sequence or 0,
        start_time_delta_ns=int((c.start_time_delta_s or 0) * 1e9),
        manual_acks=True,
    )


class _Batch:
    """Deliveries handed over together: their payloads and their channel sequences (no partitions: one server,
    nothing leads)."""

    __slots__ = ("_data", "_sequences")

    def __init__(self, data: list[bytes], sequences: list[int]):
        self._data, self._sequences = data, sequences

    def payloads(self) -> list[bytes]:
        return self._data

    def partitions(self) -> None:
        return None

    def offsets(self) -> list[int]:
        return self._sequences


class BatchedSubscription(stan.StanSubscription):
    """A subscription whose deliveries come straight from nats-py's parser and are handed over once per read.

    The first delivery of a read schedules the hand-over (`call_soon`), which runs when the parser has finished
    that read's bytes; the batch then goes to `on_message` in one call and its Acks to the socket in one write.
    Deliveries that arrive before the server's answer to the subscription wait until it came (`on_ready`)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._data: list[bytes] = []
        self._sequences: list[int] = []
        self._acks: list[bytes] = []
        self._scheduled = False
        self._publishing: set[asyncio.Task[None]] = set()  # Acks handed to a reconnecting client, one task a batch
        self.handed = 0

    async def open_inbox(self) -> Any:
        return await stan.subscribe_inbox(self.conn.nc, self.inbox, self._arrived)

    def _arrived(self, data: bytes, _reply: bytes) -> None:
        m = pb.MsgProto.FromString(data)
        self._data.append(m.data)
        self._sequences.append(m.sequence)
        self._acks.append(pb.Ack(subject=m.subject, sequence=m.sequence).SerializeToString())
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.hand_over)

    def on_ready(self) -> None:
        self.hand_over()

    @property
    def held(self) -> int:
        return len(self._data)

    def hand_over(self) -> None:
        self._scheduled = False
        if not self._data or not self.ready:
            return
        batch = _Batch(self._data, self._sequences)
        acks, self._data, self._sequences, self._acks = self._acks, [], [], []
        self.on_message(batch)
        self.handed += len(batch.payloads())
        self._send_acks(acks)

    def _send_acks(self, acks: list[bytes]) -> None:
        """Connected: the batch's Acks written in one call. Otherwise nats-py takes them (buffered while it
        reconnects); those it refuses (closed, its buffer full) are told to the connection as not sent."""
        nc, inbox = self.conn.nc, self.ack_inbox
        write = getattr(nc, "write_publishes", None)
        if write is not None and nc.is_connected:
            write([(inbox, "", ack) for ack in acks])
            return
        task = asyncio.get_running_loop().create_task(self._publish_acks(acks))
        self._publishing.add(task)
        task.add_done_callback(self._publishing.discard)

    async def _publish_acks(self, acks: list[bytes]) -> None:
        nc, inbox = self.conn.nc, self.ack_inbox
        for sent, ack in enumerate(acks):
            try:
                await nc.publish(inbox, ack)
            except Exception as exc:
                unsent = len(acks) - sent
                why = f"{unsent} of {len(acks)} Acks on {self.subject} not sent: {type(exc).__name__}: {exc}"
                self.conn.acks_not_sent(unsent, why)
                return


class StanDriver:
    """Everything a cell does against one NATS Streaming server, for one process."""

    message_threads = ("main",)  # nats-py reads, parses and writes on the event loop
    acks = True  # every publish gets a PubAck

    def __init__(
        self, url: str, cell: StanCell, cell_id: str, route: str = "", client: Mapping[str, Any] | None = None
    ):
        access = dict(client or {})
        cluster_id = access.pop("cluster_id", None) or cell.broker.cluster_id
        if not cluster_id:
            raise BrokerError("NATS Streaming: no cluster id to connect to (the broker's client settings have none)")
        self.url, self.cell, self.access, self.cluster_id = url, cell, access, cluster_id
        self.subject = subject_for(cell_id, route)
        self.connections: list[stan.StanConnection] = []  # the live ones: a lost one is closed and forgotten
        self.errors = ClientErrors()
        self._subscription: BatchedSubscription | None = None
        self._on_arrival: Callable[[], None] | None = None
        self._forgetting: set[asyncio.Task[None]] = set()  # closes of lost connections under way

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """Every connection opened from now on calls `on_arrival` when the server's bytes reach it."""
        self._on_arrival = on_arrival

    async def connect(self, name: str) -> stan.StanConnection:
        """A nats-py connection (the harness's client, the matrix's `client.connect` over its defaults) and a
        streaming connection on it, which owns it."""
        nc = await nats_connect(self.url, self.cell, name, self.access, self._on_arrival, self.errors)
        c = self.cell.client
        try:
            conn = await stan.connect(
                nc,
                self.cluster_id,
                client_id_for(name),
                owns_nc=True,
                max_pub_acks_in_flight=c.max_pub_acks_in_flight,
                pub_ack_wait_s=c.pub_ack_wait_s,
                on_lost=self._lost,
                on_acks_not_sent=lambda reason: self.errors.error("ack_failed", reason),
            )
        except BaseException:
            await nc.close()
            raise
        if isinstance(nc, DirectClient):  # nats-py gave up reconnecting: the streaming connection is lost
            nc.on_closed = conn.nats_closed
        self.connections.append(conn)
        return conn

    def _lost(self, reason: str) -> None:
        """A streaming connection was lost (its NATS connection closed for good, or the server stopped answering
        PINGs or forgot the client): counted, then closed and forgotten. Nothing reconnects it: a lost producer
        refuses every later send, a lost consumer receives no more."""
        self.errors.error("connection_lost", reason)
        task = asyncio.get_running_loop().create_task(self._forget_lost())
        self._forgetting.add(task)
        task.add_done_callback(self._forgetting.discard)

    async def _forget_lost(self) -> None:
        """Drop every lost connection from the driver at once (a consumer's batch read before the loss is handed
        over first), then close each: a second loss meanwhile finds only the ones not dropped yet."""
        lost = [c for c in self.connections if c.lost is not None]
        self.connections = [c for c in self.connections if c.lost is None]
        sub = self._subscription
        if sub is not None and sub.conn in lost:
            sub.hand_over()
            self._subscription = None
        for conn in lost:
            await self._close(conn)

    # -- routes: a channel exists once used ---------------------------------------------------------------------
    async def prepare(self) -> None:
        """Nothing: the server creates the cell's channel on its first publish or subscription."""

    async def cleanup(self) -> None:
        """Nothing: the channel is the cell's own; the server's `max_inactivity` limit may remove it."""

    # -- producers ----------------------------------------------------------------------------------------------
    async def open_producer(self, name: str, connections: int) -> list[stan.StanConnection]:
        return [await self.connect(f"{name}-{i}") for i in range(connections)]

    async def send_batch(self, conn: stan.StanConnection, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """Frame every message as it is pulled and write the batch in one call; PubAcks come through `on_ack`."""

        def acked(seq: int, error: str | None) -> None:
            on_ack(seq, None, None, error)

        return await conn.publish_batch(self.subject, ((seq, payload) for seq, _stream, payload in messages), acked)

    async def request(self, conn: Any, payload: bytes, timeout_s: float) -> None:
        raise BrokerError("NATS Streaming has no request/reply (its cells measure e2e or publish)")

    # -- consumers ----------------------------------------------------------------------------------------------
    async def open_consumer(self, name: str, on_messages: MessagesCallback, lagging: bool = False) -> None:
        """Join the cell's queue group; returns once the server confirmed the subscription, so every message
        published from then on reaches the group."""
        if lagging:
            raise BrokerError("lagging consumers read a Kafka topic's backlog; NATS Streaming cells have none")
        conn = await self.connect(name)
        sub = await conn.subscribe(self.subject, on_messages, subscription_options(self.cell), BatchedSubscription)
        assert isinstance(sub, BatchedSubscription)
        self._subscription = sub

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        raise BrokerError("NATS Streaming has no request/reply (its cells measure e2e or publish)")

    def backlog(self) -> int | None:
        """Deliveries the consumer's connection holds unparsed (unread bytes over one framed delivery), plus a
        batch not handed over yet; None for a process that only sends."""
        sub = self._subscription
        if sub is None:
            return None
        nc = sub.conn.nc
        unread = nc.unread_bytes() if isinstance(nc, DirectClient) else None
        if unread is None:
            return None
        return sub.held + unread // (self.cell.workload.message_size_bytes + DELIVERY_OVERHEAD_BYTES)

    async def close(self) -> None:
        """Close every streaming connection (a durable subscription stays on the server, suspended), and wait for
        the closes of lost ones under way."""
        if self._subscription is not None:
            self._subscription.hand_over()  # what was read is handed over before the client goes
            self._subscription = None
        connections, self.connections = self.connections, []
        for conn in connections:
            await self._close(conn)
        if self._forgetting:
            await asyncio.gather(*self._forgetting, return_exceptions=True)

    async def _close(self, conn: stan.StanConnection) -> None:
        """Close one streaming connection; a server that no longer answers (killed) is left after
        `CLOSE_TIMEOUT_S` and the nats-py connection closed anyway."""
        try:
            await asyncio.wait_for(conn.close(), CLOSE_TIMEOUT_S)
        except Exception as exc:
            if conn.lost is None and conn.nc.is_connected:  # a loss was counted when it happened
                self.errors.error("close_failed", str(exc) or type(exc).__name__)
            with contextlib.suppress(Exception):
                await conn.nc.close()
