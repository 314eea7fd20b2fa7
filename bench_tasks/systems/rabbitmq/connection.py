"""pika connections on the harness's asyncio loop: open one, wait for a callback-style call, send now.

pika's asyncio adapter reports through callbacks; `call` and `control_reply` turn one call into an awaitable.
`write_now` hands what a publish framed to the kernel at once, in one write: pika appends each frame of a publish
(method, content header, body) to its transport's buffer as a chunk of its own and sends the chunks one `send`
each when the loop next turns, so a message would wait a loop turn and leave as three TCP segments (TCP_NODELAY),
each waking the node's reader (`bench/rabbitmq_latency_parts.py`, docs/rabbitmq.md).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from typing import Any

import pika
from pika.adapters.asyncio_connection import AsyncioConnection

from ...errors import BrokerError

OPEN_TIMEOUT_S = 10.0


async def call(start: Callable[[Callable[[Any], None]], Any], timeout_s: float = OPEN_TIMEOUT_S) -> Any:
    """Run a pika call that reports through a callback, and wait for that callback's argument."""
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    start(lambda result=None: done.done() or done.set_result(result))
    return await asyncio.wait_for(done, timeout_s)


async def control_reply(channel: Any, start: Callable[[Callable[[Any], None]], Any], what: str) -> Any:
    """A control call on `channel` (declare, bind, delete) and the broker's reply to it. A refusal closes the
    channel instead of replying (e.g. 405 RESOURCE_LOCKED: another connection holds the queue exclusively), so the
    channel closing fails the call at once with the broker's reason, as does no reply within the open timeout."""
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def closed(_channel: Any, reason: BaseException) -> None:
        if not done.done():
            done.set_exception(BrokerError(f"{what}: refused, the node closed the channel: {reason}"))

    channel.add_on_close_callback(closed)
    start(lambda result=None: done.done() or done.set_result(result))
    timeout_s = OPEN_TIMEOUT_S
    try:
        return await asyncio.wait_for(done, timeout_s)
    except TimeoutError:
        raise BrokerError(f"{what}: no reply from the node within {timeout_s:g} s") from None


async def connect(
    url: str, name: str, connect_kwargs: Mapping[str, Any], access: Mapping[str, Any] | None = None
) -> AsyncioConnection:
    """An open connection on the running loop; `connect_kwargs` (the matrix's `client.connect`) become
    pika.ConnectionParameters over the URL's own (e.g. heartbeat, frame_max). `access`: external brokers'
    credentials and CA (`access.client_access`), kept out of the URL, which is recorded."""
    params = pika.URLParameters(url)
    access = access or {}
    if access.get("username"):
        params.credentials = pika.PlainCredentials(access["username"], access.get("password") or "")
    if access.get("tls_ca_file"):
        params.ssl_options = pika.SSLOptions(ssl.create_default_context(cafile=access["tls_ca_file"]), params.host)
    for key, value in connect_kwargs.items():
        if not hasattr(params, key):
            raise BrokerError(f"client.connect[{key!r}]: not a pika connection parameter")
        setattr(params, key, value)
    params.client_properties = {"connection_name": name}
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[Any] = loop.create_future()

    def failed(_conn: Any, exc: BaseException | str) -> None:
        if not opened.done():
            opened.set_exception(BrokerError(f"RabbitMQ connection to {params.host}:{params.port} failed: {exc}"))

    conn = AsyncioConnection(
        params, on_open_callback=opened.set_result, on_open_error_callback=failed, custom_ioloop=loop
    )
    timeout_s = OPEN_TIMEOUT_S
    try:
        await asyncio.wait_for(opened, timeout_s)
    except TimeoutError:
        abandon(conn)  # a node that took the TCP connection and never answered: its socket is not left open
        where = f"{params.host}:{params.port}"
        raise BrokerError(
            f"RabbitMQ connection to {where}: no answer within {timeout_s:g} s (is the node stalled?)"
        ) from None
    except BaseException:
        abandon(conn)
        raise
    return conn


def abandon(conn: AsyncioConnection) -> None:
    """Close a connection nobody will use, whatever state it got to (one still opening is aborted at once)."""
    if not (conn.is_closing or conn.is_closed):
        conn.close()


def write_now(conn: AsyncioConnection) -> None:
    """Send what pika holds for the connection's socket now, joined into one write, instead of chunk by chunk
    when the loop next turns. Reaches into pika's transport (`_tx_buffers`, `_on_socket_writable`: the call the
    loop makes when the socket is writable, which sends what it can and keeps watching for the rest); pika is
    pinned (1.4.4), and tests/integration/test_rabbitmq_driver.py checks that a batch leaves in one write."""
    transport = conn._transport
    buffers = None if transport is None else getattr(transport, "_tx_buffers", None)
    if not buffers:
        return
    if len(buffers) > 1:
        joined = b"".join(buffers)
        buffers.clear()
        buffers.append(joined)
    transport._on_socket_writable()
