"""A producer's record of every message it was scheduled to send: preallocated per-message arrays the hot path
only assigns into, its progress reports, and its rows of the lake's sent table."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..core.schedule import PhasePlan
from .driver import Outgoing
from .pacing import IN_FLIGHT_NS, Traffic
from .plan import Channels, Clock, WorkerPlan
from .rawfiles import sent_table


class SentLog:
    """Preallocated per-message arrays of one producer: the hot path only assigns into them."""

    def __init__(self, intended: np.ndarray, clock: Clock):
        n = intended.size
        self.clock = clock
        self.intended = intended
        self.sent = np.full(n, -1, dtype=np.int64)
        self.acked = np.full(n, -1, dtype=np.int64)
        self.partition = np.full(n, -1, dtype=np.int32)
        self.offset = np.full(n, -1, dtype=np.int64)
        self.errors: dict[int, str] = {}
        self.attempted = 0
        self.fresh_sends: list[tuple[int, int]] = []  # seq ranges [start, end) sent since the last report
        self.fresh_acks: list[int] = []  # seqs acked since the last report
        self.acked_count = 0
        self.traffic = Traffic()  # the reporter goes right after a send (or an rtt reply)

    def on_ack(self, seq: int, partition: int | None, offset: int | None, error: str | None) -> None:
        if error is None:
            self.acked[seq] = self.clock()
            self.partition[seq] = -1 if partition is None else partition
            self.offset[seq] = -1 if offset is None else offset
            self.acked_count += 1
            self.fresh_acks.append(seq)
        else:
            self.errors[seq] = error

    def replied(self, seq: int, at_ns: int) -> None:
        """An rtt reply that reached the process at `at_ns`."""
        self.acked[seq] = at_ns
        self.acked_count += 1
        self.fresh_acks.append(seq)

    def stamped(self, messages: Iterator[tuple[int, int, bytes]], stream: int = 0) -> Outgoing:
        """Record each message's send time as the driver pulls it (the clock was read right then)."""
        sent = self.sent
        for seq, sent_ns, message in messages:
            sent[seq] = sent_ns
            yield seq, stream, message

    def refused(self, refused: dict[int, str]) -> None:
        """Messages the client never took: not sent, with the client's reason."""
        for seq, error in refused.items():
            self.sent[seq] = -1
            self.errors[seq] = error

    def table(self, producer_id: int, plan: PhasePlan) -> pa.Table:
        columns = {"seq": np.arange(self.intended.size, dtype=np.int64), "intended_ns": self.intended}
        columns |= {"sent_ns": self.sent, "acked_ns": self.acked, "partition": self.partition, "offset": self.offset}
        return sent_table(columns, producer_id, plan, self.errors)


def until_delivered(log: SentLog) -> int:
    """How long a producer's report waits after a send (`Traffic`): `IN_FLIGHT_NS`, or half the way to the
    next send when that is sooner (none at high rates)."""
    if log.attempted >= log.intended.size:
        return 0
    gap_ns = int(log.intended[log.attempted]) - log.clock()
    return int(min(gap_ns // 2, IN_FLIGHT_NS))


def send_progress(plan: WorkerPlan, channels: Channels, log: SentLog) -> None:
    sends, log.fresh_sends = log.fresh_sends, []
    acks, log.fresh_acks = log.fresh_acks, []
    lag_idx = seq_ranges(sends)
    lag_idx = lag_idx[log.sent[lag_idx] >= 0]  # refused messages have no send time
    ack_idx = np.asarray(acks, dtype=np.int64)
    channels.events.put(
        {
            "kind": "progress",
            "role": "producer",
            "index": plan.index,
            "attempted": log.attempted,
            "acked": log.acked_count,
            "errors": len(log.errors),
            "lag_ns": log.sent[lag_idx] - log.intended[lag_idx],
            "ack_intended_ns": log.acked[ack_idx] - log.intended[ack_idx],
            "ack_sent_ns": log.acked[ack_idx] - log.sent[ack_idx],
            "ack_at_ns": log.intended[ack_idx],
        }
    )


def seq_ranges(ranges: list[tuple[int, int]]) -> np.ndarray:
    """The seqs of [start, end) ranges; one arange when they follow each other (the open loop's batches)."""
    if not ranges:
        return np.empty(0, np.int64)
    if all(b[0] == a[1] for a, b in itertools.pairwise(ranges)):
        return np.arange(ranges[0][0], ranges[-1][1])
    return np.concatenate([np.arange(a, b) for a, b in ranges])
