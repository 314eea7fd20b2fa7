"""NATS Streaming's requests on top of NATS: the subjects a server announces, the subscription request and its
start positions, and the errors a client meets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg

from ...errors import BrokerError
from . import protocol as pb


@dataclass(frozen=True)
class ServerSubjects:
    """Where a connected client sends its requests (from the server's ConnectResponse)."""

    pub_prefix: str
    sub_requests: str
    unsub_requests: str
    sub_close_requests: str
    close_requests: str
    ping_requests: str
    ping_interval_s: int
    ping_max_out: int
    protocol: int

    @classmethod
    def from_response(cls, resp: Any) -> ServerSubjects:
        if resp.error:
            raise StanError(f"the streaming server refused the connection: {resp.error}")
        return cls(
            pub_prefix=resp.pubPrefix,
            sub_requests=resp.subRequests,
            unsub_requests=resp.unsubRequests,
            sub_close_requests=resp.subCloseRequests,
            close_requests=resp.closeRequests,
            ping_requests=resp.pingRequests,
            ping_interval_s=resp.pingInterval,
            ping_max_out=resp.pingMaxOut,
            protocol=resp.protocol,
        )


@dataclass(frozen=True)
class SubscriptionOptions:
    """A subscription's settings (the names of the cell's client model). `durable`: the durable name, "" for none."""

    queue: str = ""
    durable: str = ""
    max_in_flight: int = 1024
    ack_wait_s: int = 30
    start_position: str = "new_only"
    start_sequence: int = 0
    start_time_delta_ns: int = 0
    manual_acks: bool = False


def subscription_request(client_id: str, subject: str, inbox: str, opts: SubscriptionOptions) -> Any:
    """The SubscriptionRequest for `opts` (start sequence / time delta only with their start position)."""
    if opts.start_position not in START_POSITIONS:
        raise StanError(f"start position {opts.start_position!r}; known: {', '.join(START_POSITIONS)}")
    req = pb.SubscriptionRequest(
        clientID=client_id,
        subject=subject,
        qGroup=opts.queue,
        inbox=inbox,
        maxInFlight=opts.max_in_flight,
        ackWaitInSecs=opts.ack_wait_s,
        durableName=opts.durable,
        startPosition=pb.START_POSITIONS[START_POSITIONS[opts.start_position]],
    )
    if opts.start_position == "sequence":
        req.startSequence = opts.start_sequence
    elif opts.start_position == "time_delta":
        req.startTimeDelta = opts.start_time_delta_ns
    return req


async def subscribe_inbox(nc: Client, subject: str, handle: Callable[[bytes, bytes], None]) -> Any:
    """Subscribe `handle(data, reply)` to one of the protocol's inboxes. On the harness's own nats-py client
    (`systems.nats.client.DirectClient`) the messages go from its parser straight to `handle`, without nats-py's Msg,
    pending queue and callback task per message; on any other client through an unbounded subscription."""
    direct = getattr(nc, "subscribe_direct", None)
    if direct is not None:
        return await direct(subject, lambda _subject, reply, data, _headers: handle(data, reply))

    async def cb(msg: Msg) -> None:
        handle(msg.data, msg.reply.encode() if msg.reply else b"")

    return await nc.subscribe(subject, cb=cb, pending_msgs_limit=0, pending_bytes_limit=0)


async def stan_request(nc: Client, subject: str, request: Any, timeout_s: float, what: str) -> bytes:
    try:
        reply = await nc.request(subject, request.SerializeToString(), timeout=timeout_s)
    except Exception as exc:  # nats-py's timeout and no-responders errors alike
        raise StanError(f"{what}: no answer from the streaming server on {subject} ({type(exc).__name__})") from None
    return reply.data


START_POSITIONS = {
    "new_only": "NewOnly",
    "last_received": "LastReceived",
    "time_delta": "TimeDeltaStart",
    "sequence": "SequenceStart",
    "first": "First",
}

DISCOVER_PREFIX = "_STAN.discover"
ACK_PREFIX = "_STAN.acks"


class StanError(BrokerError):
    """The streaming server refused a request, did not answer, or the connection was lost."""


class PublishWindowFull(StanError):
    """`max_pub_acks_in_flight` publishes wait for their PubAck; this one was not sent."""
