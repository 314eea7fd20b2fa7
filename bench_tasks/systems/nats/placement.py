"""Placing a JetStream R3 stream's leader on one node (`broker.leader: node:N`) by leader step-down.

A new stream's leader is whichever replica wins its first Raft election. While another node leads, the harness
asks the leader to step down (`$JS.API.STREAM.LEADER.STEPDOWN.<stream>`), naming node N as the preferred
successor (servers from 2.11 honour it; older ones hold a fresh election among the followers), and waits for the
new leader. A bounded number of step-downs within a deadline; a stream still led elsewhere then fails the cell
before any message is sent, naming the actual leader. Placement by server tags would pin the stream's replicas,
not which of them leads, so step-down is the one tool that places an R3 leader.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client

from ...errors import BrokerError
from .cluster import node_index, node_name

STEPDOWN_ATTEMPTS = 8
PLACEMENT_TIMEOUT_S = 30.0
_POLL_S = 0.1
_INFO_TIMEOUT_S = 1.0


async def place_stream_leader(
    nc: Client, stream: str, leader: int, attempts: int = STEPDOWN_ATTEMPTS, timeout_s: float = PLACEMENT_TIMEOUT_S
) -> int:
    """Step the stream's leader down until node `leader` leads it; returns how many step-downs it took."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    steps = 0
    while True:
        actual = await _settled_leader(nc, stream, deadline)
        if actual == leader:
            return steps
        if steps >= attempts or loop.time() > deadline:
            raise BrokerError(
                f"broker.leader node:{leader}: stream {stream!r} is led by node {actual} after {steps} leader "
                f"step-down{'s' if steps != 1 else ''} ({loop.time() - deadline + timeout_s:.1f}s)"
            )
        await _step_down(nc, stream, leader)
        steps += 1
        await _wait_for_change(nc, stream, actual, deadline)


async def stream_leader_now(nc: Client, stream: str) -> int | None:
    """The stream's leader node as the JetStream API says now; None during an election (no leader answers the
    request within a second)."""
    return node_index(await _leader_name(nc, stream) or "")


async def await_stream_leader(nc: Client, stream: str, timeout_s: float = PLACEMENT_TIMEOUT_S) -> str:
    """The name of the server leading a replicated stream, once one does. `add_stream` returns when the
    metadata leader has placed the stream; its own Raft group elects a leader after that, and a publish into
    that gap gets no answer (seen on a loaded host). Any server's name: an external cluster's too."""
    name = await _settled_name(nc, stream, asyncio.get_running_loop().time() + timeout_s)
    if name is None:
        raise BrokerError(f"stream {stream!r} has no leader {timeout_s:.0f} s after it was created")
    return name


async def _leader_name(nc: Client, stream: str) -> str | None:
    """The leading server's name as the stream's info says; None during an election (no answer within a
    second, or JetStream's 503: nobody answers for the stream yet) or from a server that is not clustered."""
    try:
        info = await nc.jetstream(timeout=_INFO_TIMEOUT_S).stream_info(stream)
    except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
        return None
    return (info.cluster.leader if info.cluster else None) or None


async def _settled_name(nc: Client, stream: str, deadline: float) -> str | None:
    """The leading server's name, once the stream has a leader (an election may be under way); None when the
    deadline passes first."""
    loop = asyncio.get_running_loop()
    while (name := await _leader_name(nc, stream)) is None and loop.time() < deadline:
        await asyncio.sleep(_POLL_S)
    return name


async def _settled_leader(nc: Client, stream: str, deadline: float) -> int | None:
    """The leader node, once the stream has one; None when the deadline passes first."""
    return node_index(await _settled_name(nc, stream, deadline) or "")


async def _wait_for_change(nc: Client, stream: str, old: int | None, deadline: float) -> None:
    """Until a leader other than `old` leads the stream (or the deadline passes)."""
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        leader = await stream_leader_now(nc, stream)
        if leader is not None and leader != old:
            return
        await asyncio.sleep(_POLL_S)


async def _step_down(nc: Client, stream: str, preferred: int) -> None:
    """Ask the stream's leader to step down, preferring node `preferred`; a server that refuses the preference
    is asked again without one."""
    subject = f"$JS.API.STREAM.LEADER.STEPDOWN.{stream}"
    body: dict[str, Any] = {"placement": {"preferred": node_name(preferred)}}
    answer = await _request(nc, subject, body)
    if answer.get("error"):
        answer = await _request(nc, subject, {})
    if answer.get("error"):
        raise BrokerError(f"stream {stream!r}: leader step-down refused: {answer['error']}")


async def _request(nc: Client, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = await nc.request(subject, json.dumps(body).encode() if body else b"", timeout=5)
    return json.loads(reply.data or b"{}")
