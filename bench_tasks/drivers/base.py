"""The driver interface (STYLE 1, after OpenMessaging Benchmark's driver-api): a driver prepares the
destination, opens producers, consumers and responders, sends, and hands received bytes to a callback.

It never reads a clock and never decides when to send: the generator owns timing, schedules and
histograms. Callbacks may be called from a driver's own thread (confluent-kafka delivers in a poll
thread), so the generator's callbacks only assign into preallocated arrays or append to lists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# on_ack(seq, partition, offset, error): a send was acknowledged (error None) or definitely failed.
AckCallback = Callable[[int, int | None, int | None, str | None], None]
# on_message(payload, partition, offset): one message arrived.
MessageCallback = Callable[[bytes, int | None, int | None], None]


class Driver(Protocol):
    acks: bool  # do sends get acknowledgements (JetStream PubAck, Kafka delivery report)?

    async def prepare(self) -> None:
        """Parent process, before any worker: create the cell's stream or topic from scratch."""

    async def cleanup(self) -> None:
        """Parent process, after the cell: delete what `prepare` created."""

    async def open_producer(self, name: str, connections: int) -> list[Any]:
        """Connections to send on; rtt uses several, each synchronous."""

    async def send(self, conn: Any, payload: bytes, seq: int, on_ack: AckCallback, stream: int = 0) -> None:
        """Hand one message to the client without waiting for the system. `stream`: which logical producer
        multiplexed on `conn` sent it (background traffic); per-producer keys derive from it."""

    async def request(self, conn: Any, payload: bytes, timeout_s: float) -> None:
        """rtt: send and return when the reply arrives (raise on timeout)."""

    async def open_consumer(self, name: str, on_message: MessageCallback, lagging: bool = False) -> None:
        """Subscribe and return only once the consumer will see every message sent from now on.
        `lagging`: an unmeasured consumer in a group of its own that reads from the oldest message."""

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        """rtt: echo every request back to its sender."""

    async def close(self) -> None:
        """Close everything this driver opened in this process."""
