"""One unit's first receipts and sample values, one metric × basis at a time, by spark_jobs.samples' rules.

A sample needs its intended time (its second on the timeline and its phase); a row without one has none, and
the gate fails its producer for it (ledger's null_intended)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spark_jobs.exact import BUCKET_BITS
from spark_jobs.metrics import E2E, HOP1, HOP2, LAG

from .facts import UnitWork
from .keys import KeySpace, repeats_in
from .read import Col, Columns

RECEIPT_ORDER = ("received_ns", "intended_ns", "sent_ns", "leader", "relay_received_ns", "relay_sent_ns")
NULLS_FIRST = np.iinfo(np.int64).min
NS_PER_S = 1_000_000_000


class Repeats:
    """Which messages were received more than once, fed the unit's received batches (producer_id, seq): the keys
    seen, and those seen again. Receipts without a seq are each their own message (as the Spark pass leaves
    them)."""

    def __init__(self, keys: KeySpace):
        self.keys, self.seen, self.again = keys, keys.empty(), keys.empty()

    def add(self, batch: Columns) -> None:
        seq = batch["seq"]
        key = self.keys.of(batch["producer_id"].values, seq)[seq.valid]
        if not len(key):
            return
        before = self.keys.holds(self.seen, key)
        new = key[~before]
        grown = self._distinct_added(new)
        self.again = self.keys.add(self.again, key[before])
        if grown < len(new):  # a message twice in this batch (rare): find which
            self.again = self.keys.add(self.again, repeats_in(new))

    def _distinct_added(self, new: np.ndarray) -> int:
        """Adds `new` to the keys seen; how many distinct keys that added (counted over the bytes touched)."""
        if not len(new):
            return 0
        if not self.keys.dense:
            had = len(self.seen)
            self.seen = self.keys.add(self.seen, new)
            return len(self.seen) - had
        part = slice(int(new.min()) >> 3, (int(new.max()) >> 3) + 1)
        had = int(np.bitwise_count(self.seen[part]).sum())
        self.keys.add(self.seen, new)
        return int(np.bitwise_count(self.seen[part]).sum()) - had

    def any(self) -> bool:
        return self.keys.size_of(self.again) > 0


class FirstReceipts:
    """Of the messages received more than once (Repeats), which receipt is the first: the least in
    RECEIPT_ORDER, nulls first (Spark's min of that struct), fed the received batches (every RECEIVED_COLUMN)
    with the row number each starts at. Holds only those messages' receipts."""

    def __init__(self, keys: KeySpace, repeats: Repeats):
        self.keys, self.again = keys, repeats.again
        self.parts: list[tuple[np.ndarray, list[np.ndarray], np.ndarray]] = []

    def add(self, batch: Columns, start: int) -> None:
        key = self.keys.of(batch["producer_id"].values, batch["seq"])
        twice = np.flatnonzero(batch["seq"].valid)
        twice = twice[self.keys.holds(self.again, key[twice])]
        if len(twice):
            fields = [np.where(batch[f].valid, batch[f].values, NULLS_FIRST)[twice] for f in RECEIPT_ORDER]
            self.parts.append((key[twice], fields, start + twice))

    def losers(self) -> np.ndarray:
        """The row numbers (sorted) of the receipts that are not their message's first; of receipts equal in
        every field, the first in file order is."""
        if not self.parts:
            return np.empty(0, np.int64)
        key = np.concatenate([k for k, _, _ in self.parts])
        row = np.concatenate([r for _, _, r in self.parts])
        fields = [np.concatenate([f[i] for _, f, _ in self.parts]) for i in range(len(RECEIPT_ORDER))]
        order = np.lexsort([row, *reversed(fields), key])
        ordered = key[order]
        first = np.r_[True, ordered[1:] != ordered[:-1]]
        return np.sort(row[order][~first])


def first_of(losers: np.ndarray, start: int, rows: int) -> np.ndarray | None:
    """Which of the `rows` receipts from row number `start` are their message's first (None: all)."""
    low, high = np.searchsorted(losers, [start, start + rows])
    if low == high:
        return None
    first = np.ones(rows, bool)
    first[losers[low:high] - start] = False
    return first


@dataclass(frozen=True)
class Values:
    """One metric × basis of one unit's samples (every phase)."""

    leader: Col
    at_ns: np.ndarray  # the message's intended time
    done_ns: np.ndarray
    value_ns: np.ndarray
    measure: np.ndarray

    def __len__(self) -> int:
        return len(self.value_ns)


@dataclass(frozen=True)
class Series:
    """One metric × basis: done − start of the sent rows or of the first receipts."""

    metric: int
    basis: int
    received: bool  # of the first receipts (else of the sent rows)
    start: str
    done: str
    relayed_only: bool = False  # hop2: only messages a relay passed on (the relay's receipt known)


def unit_series(work: UnitWork, relayed: bool) -> list[Series]:
    """The series a unit measures: the send lag; acked − intended and − sent where acknowledgements are
    measured; e2e from intended and sent where receipts are; for relayed messages (chains) hop1 to the
    relay's receipt and hop2 from the relay's receipt and send (`relayed`: any receipt carries the relay's)."""
    series = [Series(LAG, 1, False, "intended_ns", "sent_ns")]
    if work.acked_code is not None:
        series += [Series(work.acked_code, b, False, s, "acked_ns") for b, s in enumerate(STARTS)]
    if work.received_measured:
        series += [Series(E2E, b, True, s, "received_ns") for b, s in enumerate(STARTS)]
        if relayed:
            series += [Series(HOP1, b, True, s, "relay_received_ns") for b, s in enumerate(STARTS)]
            series += [Series(HOP2, b, True, s, "received_ns", True) for b, s in enumerate(RELAY_STARTS)]
    return series


STARTS = ("intended_ns", "sent_ns")  # basis intended, basis sent
RELAY_STARTS = ("relay_received_ns", "relay_sent_ns")  # hop2's


def series_values(work: UnitWork, series: Series, rows: Columns, first: np.ndarray | None) -> Values:
    """The series' done − start in `rows` (a batch of its side: sent rows, or receipts) where both (and the
    intended time) are known; of receipts, first ones only (`first`: None, all)."""
    intended, begin, end = rows["intended_ns"], rows[series.start], rows[series.done]
    keep = intended.valid & begin.valid & end.valid
    if series.received and first is not None:
        keep &= first
    if series.relayed_only:
        keep &= rows["relay_received_ns"].valid
    count = int(keep.sum())
    leader = rows["leader"].take(keep) if series.received else Col(np.zeros(count, np.int64), np.zeros(count, bool))
    ends = end.values[keep]
    return Values(leader, intended.values[keep], ends, ends - begin.values[keep], work.in_measure(intended)[keep])


def log_bucket(values: np.ndarray, bits: int = BUCKET_BITS) -> np.ndarray:
    """spark_jobs.exact.log_bucket in numpy (numpy's log2, as the tests' expected histograms): a task both
    counts and picks with it, so its buckets only need to agree with themselves."""
    scale, v = float(1 << bits), values.astype(np.float64)
    bucket = np.floor(np.log2(np.maximum(v, 1.0)) * scale).astype(np.int64)
    below = np.flatnonzero(v < 1.0)  # rare: zero or negative latencies
    bucket[below] = -1 - np.floor(np.log2(1.0 - v[below]) * scale).astype(np.int64)
    return bucket


def seconds(times_ns: np.ndarray, t0_ns: int) -> np.ndarray:
    """Whole seconds from the unit's t0: spark_jobs.analysis.second's floor of a double division, computed as
    an integer floor division (the same for every time within 2^53 ns, 104 days, of t0: the double quotient of
    an integer never rounds across a whole second there)."""
    return np.floor_divide(times_ns - t0_ns, NS_PER_S)


@dataclass(frozen=True)
class Bucketed:
    """One series of a cell (its units' Values together), each sample with its unit, seconds and log bucket."""

    unit: np.ndarray
    leader: Col
    sec: np.ndarray  # of its intended time
    done_sec: np.ndarray  # of when it was done (sent, acknowledged, received)
    measure: np.ndarray
    bucket: np.ndarray
    value: np.ndarray

    @classmethod
    def of(cls, parts: list[tuple[UnitWork, Values]]) -> Bucketed:
        """The parts' samples end to end; seconds count from each unit's own t0."""

        def joined(pick: Callable[[UnitWork, Values], np.ndarray]) -> np.ndarray:
            return np.concatenate([pick(work, values) for work, values in parts])

        value = joined(lambda w, v: v.value_ns)
        return cls(
            unit=joined(lambda w, v: np.full(len(v), w.unit, np.int64)),
            leader=Col(joined(lambda w, v: v.leader.values), joined(lambda w, v: v.leader.valid)),
            sec=joined(lambda w, v: seconds(v.at_ns, w.t0_ns)),
            done_sec=joined(lambda w, v: seconds(v.done_ns, w.t0_ns)),
            measure=joined(lambda w, v: v.measure),
            bucket=log_bucket(value),
            value=value,
        )

    @classmethod
    def one(cls, work: UnitWork, v: Values) -> Bucketed:
        """One unit's samples (of a batch), without copying them end to end."""
        return cls(
            unit=np.full(len(v), work.unit, np.int64),
            leader=v.leader,
            sec=seconds(v.at_ns, work.t0_ns),
            done_sec=seconds(v.done_ns, work.t0_ns),
            measure=v.measure,
            bucket=log_bucket(v.value_ns),
            value=v.value_ns,
        )

    def take(self, rows: np.ndarray) -> Bucketed:
        """The samples at `rows` (a mask or indices)."""
        return Bucketed(
            self.unit[rows],
            self.leader.take(rows),
            self.sec[rows],
            self.done_sec[rows],
            self.measure[rows],
            self.bucket[rows],
            self.value[rows],
        )
