"""The driver interface (STYLE 1, after OpenMessaging Benchmark's driver-api): a driver prepares the
destination, opens producers, consumers and responders, sends, and hands received bytes to a callback.

It never reads a clock and never decides when to send: the generator owns timing, schedules and
histograms. Both directions work in batches, because one Python call per message is what limits a
harness: `send_batch` takes an iterator the generator stamps as the driver pulls each message from it
(so each message's send time is read right before the client gets it), and consumers hand over whatever
the client returned in one go (`Received`), which the generator stamps once on arrival. Callbacks may be
called from a driver's own thread (confluent-kafka's poll and consume threads), so the generator's
callbacks only assign into preallocated arrays.

A driver also says what the harness cannot see from outside: `backlog()`, how many messages the client
holds that the harness has not been handed yet (librdkafka's fetch queue, bytes nats-py has not parsed).
A backlog that grows is a queue inside the harness, and the cell fails for it (`saturation`). Where the
client lets it, a driver also signals the moment bytes from the network reach the process, before the
client parses them (`watch_arrivals`): the generator stamps a message's receipt then, and measures how
long it waited inside the harness until it was handed over.

What a client reports beside its messages is counted, never swallowed (`ClientErrors`): errors by kind,
and messages it threw away because the queue it keeps for the harness was full, which fail the cell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from ..secrecy import without_userinfo

log = logging.getLogger("sixnines.driver")

# on_ack(seq, partition, offset, error): a send was acknowledged (error None) or definitely failed.
AckCallback = Callable[[int, int | None, int | None, str | None], None]
# What the generator hands `send_batch`: (seq, stream, payload) per message, stamped as it is pulled.
# `stream`: which logical producer multiplexed on the connection sent it (per-producer keys derive from it).
Outgoing = Iterator[tuple[int, int, bytes]]


class Received(Protocol):
    """Messages the client handed over together. The generator stamps the hand-over first, then reads."""

    def payloads(self) -> Sequence[bytes]: ...

    def partitions(self) -> Sequence[int] | None:
        """Partition of each payload (Kafka; a JetStream stream is partition 0); None where there are none."""

    def offsets(self) -> Sequence[int] | None:
        """Log offset or stream sequence of each payload; None where there are none."""


# on_messages(batch): one hand-over from the client.
MessagesCallback = Callable[[Received], None]


class ClientErrors:
    """What one driver's clients reported beside their messages: each error counted by kind with the last
    one's text (librdkafka's error events, nats-py's error callback: a reconnect during a fault, a refused
    authorization), the first of each kind logged; and messages a client received but dropped because the
    queue it keeps for the harness was full (nats-py's slow consumer). Those were lost by the harness, not
    by the system, so each fails the cell (`saturation.verdict`)."""

    def __init__(self) -> None:
        self.kinds: dict[str, int] = {}
        self.last: str | None = None
        self.dropped = 0

    def error(self, kind: str, text: str) -> None:
        text = without_userinfo(text)  # a client's message may quote a server URL with its credentials
        if kind not in self.kinds:
            log.warning("client error %s: %s", kind, text)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        self.last = f"{kind}: {text}"

    def drop(self, messages: int = 1) -> None:
        if not self.dropped:
            log.warning("a client dropped received messages: the queue it keeps for the harness was full")
        self.dropped += messages

    def summary(self) -> dict[str, Any]:
        return {"count": sum(self.kinds.values()), "kinds": dict(self.kinds), "last": self.last}


class Driver(Protocol):
    acks: bool  # do sends get acknowledgements (JetStream PubAck, Kafka delivery report)?
    # Name prefixes of this process's threads every message passes through (OS thread names; the event loop
    # is `main`): a starved one means messages waited inside the harness (`saturation`).
    message_threads: tuple[str, ...]
    errors: ClientErrors  # what its clients reported beside the messages

    async def prepare(self) -> None:
        """Parent process, before any worker: create the cell's stream or topic from scratch."""

    async def cleanup(self) -> None:
        """Parent process, after the cell: delete what `prepare` created."""

    async def open_producer(self, name: str, connections: int) -> list[Any]:
        """Connections to send on; rtt uses several, each synchronous."""

    async def send_batch(self, conn: Any, messages: Outgoing, on_ack: AckCallback) -> dict[int, str]:
        """Hand every message of `messages` to the client without waiting for the system, pulling each one
        only when the client is ready to take it. Returns the messages the client refused ({seq: error})."""

    async def request(self, conn: Any, payload: bytes, timeout_s: float) -> None:
        """rtt: send and return when the reply arrives (raise on timeout)."""

    async def open_consumer(
        self, name: str, on_messages: MessagesCallback, lagging: bool = False, subscription: int = 0
    ) -> None:
        """Subscribe and return only once the consumer will see every message sent from now on.
        `lagging`: an unmeasured consumer in a group of its own that reads from the oldest message.
        `subscription` > 0: a background reader in the route's consumer group of that number, each group reading
        every message; only drivers of systems that take `background.subscriptions` accept it (the others'
        validation refuses the field, and their drivers are never asked)."""

    async def open_responder(self, name: str, on_request: Callable[[], None]) -> None:
        """rtt: echo every request back to its sender."""

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """From now on, call `on_arrival()` whenever bytes from the network reach this process's clients, before
        they are parsed (call before opening anything). A no-op where the client does not expose its reads."""

    def backlog(self) -> int | None:
        """Messages this process's clients hold for the harness that it has not taken yet (consumers), or
        delivery reports waiting to be served (producers); None when the client cannot tell."""

    async def close(self) -> None:
        """Close everything this driver opened in this process."""
