"""A receiver's record of every receipt: int64 columns in fixed-size blocks (no Python object per message),
decoded in batches, reported as fresh latencies and written as the lake's received table."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..core.schedule import PhasePlan
from ..lake.records import RECEIVED_SCHEMA, write_parquet_parts
from .driver import Received
from .pacing import Traffic
from .payload import decode_headers, decode_relay_stamps
from .plan import Channels, Clock, WorkerPlan
from .rawfiles import received_table

_FLUSH_EVERY = 4096  # received messages decoded together (and sooner, see _FLUSH_AFTER_NS)
_FLUSH_AFTER_NS = 100_000_000
WRITE_ROWS = 1 << 16  # receipts per slice of a receiver's Parquet file (row groups of at most this many rows)


RECEIVED_FIELDS = (
    "pid",
    "seq",
    "intended",
    "sent",
    "received",
    "partition",
    "offset",
    "hop",
    "relay_received",
    "relay_sent",
    "handed",  # when the client handed the message over (not landed: the harness facts summarise it)
)
COLUMN = {name: i for i, name in enumerate(RECEIVED_FIELDS)}


class Arrivals:
    """When bytes last reached this process's clients from the network. Drivers that can tell (nats-py's
    reads) call `mark` before the client parses them; a receipt is then stamped at that moment, which is
    never earlier than its own bytes' arrival (they were read before it was handed over) and never later
    than its hand-over. Where the client cannot tell (librdkafka), a receipt is stamped at its hand-over."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.last_ns = 0

    def mark(self) -> None:
        self.last_ns = self.clock()

    def stamp(self, handed_ns: int) -> int:
        return self.last_ns or handed_ns


class ReceivedLog:
    """Every receipt of one receiver, as int64 columns in fixed-size blocks (no Python object per message).

    `on_messages` is the driver's callback: it stamps the hand-over (and takes the arrival stamp) first, then
    keeps the batch's payloads until enough have gathered to decode their headers in one numpy view
    (`flush`). The blocks for the receipts the schedule promises (`expected`) are allocated, and their pages
    touched, before the schedule starts; more are added one block at a time, so growing never copies what
    is already there (a doubling array would stall the receiver for a copy of everything it holds). Only the
    receiving thread writes; the reporter, in another thread with Kafka, reads `count` first and the
    columns after, so it never sees a row being written."""

    BLOCK = 1 << 16

    def __init__(self, clock: Clock, expected: int = 0) -> None:
        self.clock = clock
        self.blocks = [self._block() for _ in range(max(1, -(-expected // self.BLOCK)))]
        self.count = 0
        self.reported = 0
        self.bad = 0
        self.arrivals = Arrivals(clock)
        self.traffic = Traffic()  # the reporter goes right after a hand-over
        self._chunks: list[tuple[int, int, Sequence[bytes], Sequence[int] | None, Sequence[int] | None]] = []
        self._gathered = 0

    def on_messages(self, batch: Received) -> None:
        handed = self.clock()
        payloads = batch.payloads()
        self._chunks.append((self.arrivals.stamp(handed), handed, payloads, batch.partitions(), batch.offsets()))
        self._gathered += len(payloads)
        if self._gathered >= _FLUSH_EVERY or handed - self._chunks[0][1] >= _FLUSH_AFTER_NS:
            self.flush()
        self.traffic.passed()

    @property
    def handed(self) -> int:
        return self.count + self._gathered

    def flush(self) -> None:
        """Decode the gathered payloads into the columns (receiving thread, or after the client closed)."""
        chunks, self._chunks, self._gathered = self._chunks, [], 0
        if not chunks:
            return
        payloads = [p for c in chunks for p in c[2]]
        counts = np.fromiter((len(c[2]) for c in chunks), dtype=np.int64, count=len(chunks))
        headers, ours = decode_headers(payloads)
        self.bad += int(ours.size - ours.sum())
        block = np.empty((len(RECEIVED_FIELDS), int(ours.sum())), dtype=np.int64)
        for name, field_ in (("pid", "producer_id"), ("seq", "seq"), ("intended", "intended_ns"), ("sent", "sent_ns")):
            block[COLUMN[name]] = headers[field_][ours]
        for name, at in (("received", 0), ("handed", 1)):
            stamps = np.fromiter((c[at] for c in chunks), dtype=np.int64, count=len(chunks))
            block[COLUMN[name]] = np.repeat(stamps, counts)[ours]
        block[COLUMN["partition"]] = _flatten([(c[3], len(c[2])) for c in chunks])[ours]
        block[COLUMN["offset"]] = _flatten([(c[4], len(c[2])) for c in chunks])[ours]
        hop = headers["hop"][ours].astype(np.int64)
        block[COLUMN["hop"]] = np.where(hop > 0, hop + 1, 0)  # the chain's final hop (2), or 0 outside a chain
        block[COLUMN["relay_received"] : COLUMN["relay_sent"] + 1] = -1
        if hop.any():
            relayed = np.flatnonzero(hop > 0)
            kept = [p for p, mine in zip(payloads, ours, strict=True) if mine]
            stamps_ = decode_relay_stamps([kept[i] for i in relayed])
            block[COLUMN["relay_received"], relayed] = stamps_[:, 0]
            block[COLUMN["relay_sent"], relayed] = stamps_[:, 1]
        self.append(block)

    def waits_us(self, window_ns: tuple[int, int]) -> dict[str, float] | None:
        """How long messages intended in `window_ns` waited inside the harness, from arrival to hand-over;
        None where the client never signalled an arrival (librdkafka: receipts are stamped at hand-over)."""
        if not self.arrivals.last_ns:
            return None
        c = self.columns()
        inside = (c["intended"] >= window_ns[0]) & (c["intended"] < window_ns[1]) & (c["handed"] >= 0)
        waits = (c["handed"] - c["received"])[inside] / 1e3
        if waits.size == 0:
            return None
        q = {p: round(float(np.percentile(waits, float(p), method="inverted_cdf")), 1) for p in ("50", "99", "99.9")}
        return {**q, "max": round(float(waits.max()), 1), "count": int(waits.size)}

    def _block(self) -> np.ndarray:
        return np.full((len(RECEIVED_FIELDS), self.BLOCK), -1, dtype=np.int64)

    def append(self, rows: np.ndarray) -> None:
        start, end = self.count, self.count + rows.shape[1]
        while end > len(self.blocks) * self.BLOCK:
            self.blocks.append(self._block())
        at = start
        while at < end:
            block, offset = divmod(at, self.BLOCK)
            n = min(end - at, self.BLOCK - offset)
            self.blocks[block][:, offset : offset + n] = rows[:, at - start : at - start + n]
            at += n
        self.count = end

    def columns(self, start: int = 0, end: int | None = None) -> dict[str, np.ndarray]:
        """Rows [start, end) by column name (copies of just those rows)."""
        end = self.count if end is None else end
        blocks = self.blocks[:]  # a block appended meanwhile holds only rows beyond `end`
        parts = [
            blocks[b][:, max(start, b * self.BLOCK) - b * self.BLOCK : min(end, (b + 1) * self.BLOCK) - b * self.BLOCK]
            for b in range(start // self.BLOCK, -(-end // self.BLOCK))
        ]
        data = np.concatenate(parts, axis=1) if parts else blocks[0][:, :0]
        return {name: data[i] for i, name in enumerate(RECEIVED_FIELDS)}

    def table(self, consumer_id: int, plan: PhasePlan, start: int = 0, end: int | None = None) -> pa.Table:
        """Rows [start, end) as the received-samples table (all of them by default)."""
        c = self.columns(start, end)
        named = {"producer_id": c["pid"], "seq": c["seq"], "intended_ns": c["intended"], "sent_ns": c["sent"]}
        named |= {"received_ns": c["received"], "partition": c["partition"], "offset": c["offset"], "hop": c["hop"]}
        named |= {"relay_received_ns": c["relay_received"], "relay_sent_ns": c["relay_sent"]}
        return received_table(named, consumer_id, plan)

    def write(self, consumer_id: int, plan: PhasePlan, path: Path) -> None:
        """The receiver's Parquet file, `WRITE_ROWS` rows at a time: writing holds one slice beside the log,
        never a second (and third, as Arrow columns) copy of every receipt (bench/receiver_memory.py)."""
        starts = range(0, self.count, WRITE_ROWS) if self.count else (0,)
        parts = (self.table(consumer_id, plan, at, min(at + WRITE_ROWS, self.count)) for at in starts)
        write_parquet_parts(RECEIVED_SCHEMA, parts, path)


def _flatten(parts: list[tuple[Sequence[int] | None, int]]) -> np.ndarray:
    """Per-message values of many hand-overs as one int64 array; a hand-over without them gives -1s."""
    total = sum(n for _, n in parts)
    if all(values is None for values, _ in parts):
        return np.full(total, -1, dtype=np.int64)
    flat = [v for values, n in parts for v in (values if values is not None else (-1,) * n)]
    return np.asarray(flat, dtype=np.int64)


def consumer_progress(plan: WorkerPlan, channels: Channels, log: ReceivedLog) -> None:
    """The latencies of the rows decoded since the last report, and how many messages the client has handed
    over: `received` counts the gathered tail too, or the drain (which waits until every sent message is
    received) would wait out its whole timeout for the last few, not yet decoded, after every schedule."""
    handed = log.handed
    end = log.count  # first: rows below it are complete
    start, log.reported = log.reported, end
    c = log.columns(start, end)
    channels.events.put(
        {
            "kind": "progress",
            "role": "consumer",
            "index": plan.index,
            "received": max(handed, end),
            "bad": log.bad,
            "e2e_intended_ns": c["received"] - c["intended"],
            "e2e_sent_ns": c["received"] - c["sent"],
            "e2e_at_ns": c["intended"].copy(),
        }
    )
