"""Publisher confirms of one channel: RabbitMQ numbers a channel's publishes 1, 2, … and acknowledges them by that
number (one Basic.Ack may cover every number up to it, `multiple`); `Confirms` maps them back to the generator's
sequence numbers and settles each exactly once."""

from __future__ import annotations

from typing import Any

from ...load.driver import AckCallback


class Confirms:
    """One channel's unconfirmed publishes: delivery tag (1, 2, … per channel) → the generator's seq."""

    def __init__(self, on_ack: AckCallback | None = None, partition: int | None = None):
        self.pending: dict[int, int] = {}
        self.next_tag = 1
        self.low = 1  # no pending tag is below this
        self.on_ack = on_ack
        self.partition = partition
        self.nacked = 0

    def sent(self, seq: int, on_ack: AckCallback) -> None:
        self.on_ack = on_ack
        self.pending[self.next_tag] = seq
        self.next_tag += 1

    def settle(self, frame: Any) -> None:
        """A Basic.Ack or Basic.Nack: the broker took (or refused) one delivery, or all up to it (`multiple`)."""
        method = frame.method
        error = None if method.NAME == "Basic.Ack" else "nack"
        self.nacked += error is not None
        tags = range(self.low, method.delivery_tag + 1) if method.multiple else (method.delivery_tag,)
        for tag in tags:
            self._done(tag, error)
        while self.low < self.next_tag and self.low not in self.pending:
            self.low += 1

    def fail_all(self, error: str) -> None:
        """The channel closed: no confirm will ever come for what is pending."""
        for tag in list(self.pending):
            self._done(tag, error)
        self.low = self.next_tag

    def _done(self, tag: int, error: str | None) -> None:
        seq = self.pending.pop(tag, None)
        if seq is not None and self.on_ack is not None:
            self.on_ack(seq, None if error else self.partition, None, error)
