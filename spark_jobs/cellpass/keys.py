"""Messages as int64 keys and sets of them, for a task that sees its unit's rows one batch at a time.

A message is a (producer, seq). A scan of those two columns (scan) gives each producer's seq range; a key is
then the producer's base plus the seq's offset in its range, the bases laid end to end (each range rounded up to
whole bytes). Seqs count up from 0 per producer, so that space is about one key per message, and a set of keys is
a bitmap of one bit per key (KeySpace.dense): ~1/8 byte a message per set. Where the seqs spread too wide for
that (more than 8 keys per row), sets are sorted arrays of the distinct keys instead, each key the producer's
rank times the seqs' whole span plus the offset, or (a span past 2^62 values) the seq's rank among all seqs."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .read import Col, Columns

KeySet = np.ndarray  # a bitmap (uint8, 8 keys a byte) over the key space, or the sorted distinct keys
BIT = (1 << np.arange(8)).astype(np.uint8)
DENSE_MIN_KEYS = 1 << 23  # a bitmap this small (1 MiB) is always taken
KEYS_PER_ROW = 8  # a bitmap up to this many keys a row (one byte a row per set) is taken


class SeqRanges:
    """Per producer, the least and greatest valid seq and the row count, gathered a batch at a time."""

    def __init__(self) -> None:
        self.low: dict[int, int] = {}
        self.high: dict[int, int] = {}
        self.rows = 0

    def add(self, batch: Columns) -> None:
        producer, seq = batch["producer_id"].values, batch["seq"]
        self.rows += len(producer)
        ids, index = np.unique(producer, return_inverse=True)
        low, high = np.full(len(ids), np.iinfo(np.int64).max), np.full(len(ids), np.iinfo(np.int64).min)
        np.minimum.at(low, index[seq.valid], seq.values[seq.valid])
        np.maximum.at(high, index[seq.valid], seq.values[seq.valid])
        for p, lo, hi in zip(ids.tolist(), low.tolist(), high.tolist(), strict=True):
            self.low[p] = min(self.low.get(p, lo), lo)
            self.high[p] = max(self.high.get(p, hi), hi)


def scan(batches: Iterable[Columns]) -> SeqRanges:
    """SeqRanges of every batch (of producer_id and seq)."""
    ranges = SeqRanges()
    for batch in batches:
        ranges.add(batch)
    return ranges


class KeySpace:
    """(producer, seq) → one int64 key per message, and sets of keys (see the module docstring)."""

    def __init__(self, ranges: SeqRanges):
        self.producers = np.array(sorted(ranges.low), np.int64)  # every producer id met (NULL_PRODUCER too)
        known = {p: ranges.high[p] >= ranges.low[p] for p in ranges.low}  # with at least one valid seq
        low = np.array([ranges.low[p] if known[p] else 0 for p in self.producers.tolist()], np.int64)
        width = [ranges.high[p] - ranges.low[p] + 1 if known[p] else 0 for p in self.producers.tolist()]
        padded = [-(-max(w, 1) // 8) * 8 for w in width]  # whole bytes, at least one: each producer's own
        self.low, self.size = low, sum(padded)  # Python ints: a span past int64 only makes the space sparse
        self.dense = self.size <= max(DENSE_MIN_KEYS, KEYS_PER_ROW * ranges.rows)
        self.base = np.cumsum([0, *padded[:-1]]).astype(np.int64) if self.dense else np.zeros(len(padded), np.int64)
        self.ranked: np.ndarray | None = None
        if not self.dense:
            valid = [lo for p, lo in ranges.low.items() if known[p]]
            self.glow = min(valid, default=0)
            self.span = max((ranges.high[p] for p in ranges.low if known[p]), default=0) - self.glow + 1

    @property
    def needs_ranks(self) -> bool:
        """Whether a sparse space must key seqs by their rank (rank): their span times the producers overflows."""
        return not self.dense and self.ranked is None and len(self.producers) * self.span >= 2**62

    def rank(self, seqs: Iterable[np.ndarray]) -> None:
        """Key seqs by their rank among `seqs` (every valid seq of the unit, in any number of parts)."""
        ranked = np.empty(0, np.int64)
        for part in seqs:
            ranked = np.union1d(ranked, part)
        self.ranked, self.glow, self.span = ranked, 0, max(len(ranked), 1)

    def index(self, producer: np.ndarray) -> np.ndarray:
        """Each row's producer's rank among `producers`."""
        return np.searchsorted(self.producers, producer)

    def of(self, producer: np.ndarray, seq: Col) -> np.ndarray:
        """Every row's key (meaningful where its seq is valid)."""
        ix = self.index(producer)
        if self.dense:
            return np.where(seq.valid, self.base[ix] + seq.values - self.low[ix], 0)
        offset = seq.values - self.glow if self.ranked is None else np.searchsorted(self.ranked, seq.values)
        return ix * self.span + offset

    def empty(self) -> KeySet:
        return np.zeros(self.size // 8, np.uint8) if self.dense else np.empty(0, np.int64)

    def add(self, keys: KeySet, new: np.ndarray) -> KeySet:
        """`keys` with `new` added (a bitmap in place)."""
        if self.dense:
            np.bitwise_or.at(keys, new >> 3, BIT[new & 7])
            return keys
        return np.union1d(keys, new)

    def holds(self, keys: KeySet, wanted: np.ndarray) -> np.ndarray:
        """Whether each of `wanted` is in `keys`."""
        if self.dense:
            return ((keys[wanted >> 3] >> (wanted & 7).astype(np.uint8)) & 1).astype(bool)
        at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        return keys[at] == wanted if len(keys) else np.zeros(len(wanted), bool)

    def both(self, a: KeySet, b: KeySet) -> KeySet:
        return a & b if self.dense else np.intersect1d(a, b, assume_unique=True)

    def minus(self, a: KeySet, b: KeySet) -> KeySet:
        return a & ~b if self.dense else np.setdiff1d(a, b, assume_unique=True)

    def size_of(self, keys: KeySet) -> int:
        return int(np.bitwise_count(keys).sum()) if self.dense else len(keys)

    def count(self, keys: KeySet) -> np.ndarray:
        """How many keys of the set each producer holds (indexed like `producers`)."""
        if not len(self.producers):
            return np.zeros(0, np.int64)
        if self.dense:
            return np.add.reduceat(np.bitwise_count(keys).astype(np.int64), self.base // 8)
        return np.bincount(keys // self.span, minlength=len(self.producers)).astype(np.int64)


def repeats_in(keys: np.ndarray) -> np.ndarray:
    """The keys that occur more than once among `keys` (distinct, sorted)."""
    ordered = np.sort(keys)
    return np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
