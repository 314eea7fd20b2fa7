"""One unit's message accounting and the gate's per-producer checks, as spark_jobs.ledger counts them.

The Spark pass needs 64-message words to avoid joining messages; a task holding one unit's rows counts the
sets directly: every (producer, seq) becomes one int64 key, and the counts are sizes of sorted unique keys and
their intersections."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .facts import UnitWork
from .read import Col, Columns

COUNT_COLUMNS = ("scheduled", "sent", "acknowledged", "got", "sent_lost", "acked_lost", "dupes")
CHECK_COLUMNS = ("producer_rows", "duplicate_seqs", "min_seq", "max_seq", "null_seq", "null_intended", "null_phase")
MINIMA = ("min_lag_ns", "min_e2e_intended_ns", "min_e2e_sent_ns", "min_ack_intended_ns", "min_ack_sent_ns")
PRODUCER_COLUMNS = ("unit", "producer_id", *COUNT_COLUMNS, *CHECK_COLUMNS, *MINIMA)  # ledger.per_producer's


KeySet = np.ndarray  # a set of message keys: a bitmap over the key space, or the sorted distinct keys


class MessageKeys:
    """(producer, seq) → one int64 per message: the producer's rank among the unit's producers times the seq
    span, plus the seq's offset (or, where the seqs spread too wide for that, its rank among them). Sets of
    keys are bitmaps over that space when it is small beside the rows (seqs count up from 0: it always is),
    else sorted arrays."""

    def __init__(self, producers: np.ndarray, seqs: list[Col]):
        self.producers = producers  # sorted distinct producer ids (NULL_PRODUCER included where present)
        valid = [c.values[c.valid] for c in seqs if c.valid.any()]
        self.low = min((int(v.min()) for v in valid), default=0)
        self.span = max((int(v.max()) for v in valid), default=0) - self.low + 1
        self.ranked: np.ndarray | None = None
        if len(producers) * self.span >= 2**62:
            self.ranked = np.unique(np.concatenate(valid))
            self.low, self.span = 0, len(self.ranked)
        self.size = len(producers) * self.span
        self.dense = self.size <= max(1 << 20, 4 * sum(len(c.values) for c in seqs))

    def of(self, producer: np.ndarray, seq: Col) -> np.ndarray:
        """Every row's key (meaningful where its seq is valid)."""
        offset = seq.values - self.low if self.ranked is None else np.searchsorted(self.ranked, seq.values)
        return np.searchsorted(self.producers, producer) * self.span + offset

    def distinct(self, keys: np.ndarray, where: np.ndarray) -> KeySet:
        if not self.dense:
            return np.unique(keys[where])
        bitmap = np.zeros(self.size, bool)
        bitmap[keys[where]] = True
        return bitmap

    def both(self, a: KeySet, b: KeySet) -> KeySet:
        return a & b if self.dense else np.intersect1d(a, b, assume_unique=True)

    def minus(self, a: KeySet, b: KeySet) -> KeySet:
        return a & ~b if self.dense else np.setdiff1d(a, b, assume_unique=True)

    def count(self, keys: KeySet) -> np.ndarray:
        """How many keys of the set each producer holds (indexed like `producers`)."""
        if self.dense:
            return keys.reshape(len(self.producers), self.span).sum(axis=1).astype(np.int64)
        return np.bincount(keys // self.span, minlength=len(self.producers)).astype(np.int64)

    def repeated(self, keys: np.ndarray) -> np.ndarray:
        """Whether each of `keys` occurs more than once among them."""
        if self.dense:
            return np.bincount(keys, minlength=self.size)[keys] > 1
        ordered = np.sort(keys)
        return np.isin(keys, ordered[1:][ordered[1:] == ordered[:-1]])


def _extreme(ufunc: np.ufunc, index: np.ndarray, values: np.ndarray, valid: np.ndarray, count: int) -> pd.array:
    """ufunc (np.minimum or np.maximum) of the valid values per producer index; null where there are none."""
    start = np.iinfo(np.int64).max if ufunc is np.minimum else np.iinfo(np.int64).min
    out = np.full(count, start, np.int64)
    ufunc.at(out, index[valid], values[valid])
    return pd.arrays.IntegerArray(out, np.bincount(index[valid], minlength=count) == 0)


def _difference(a: Col, b: Col) -> tuple[np.ndarray, np.ndarray]:
    return a.values - b.values, a.valid & b.valid


def producer_rows(work: UnitWork, sent: Columns, received: Columns) -> pd.DataFrame:
    """PRODUCER_COLUMNS for every producer with a sent or received row of the unit."""
    ps, pr = sent["producer_id"].values, received["producer_id"].values
    producers = np.unique(np.concatenate([ps, pr]))
    count = len(producers)
    keys = MessageKeys(producers, [sent["seq"], received["seq"]])
    ix_s, ix_r = np.searchsorted(producers, ps), np.searchsorted(producers, pr)
    ks, kr = keys.of(ps, sent["seq"]), keys.of(pr, received["seq"])
    has_s, has_r = sent["seq"].valid, received["seq"].valid
    measure_s, measure_r = work.in_measure(sent["intended_ns"]), work.in_measure(received["intended_ns"])
    sent_ok, acked_ok = sent["sent_ns"].valid, sent["acked_ns"].valid
    scheduled = keys.distinct(ks, measure_s & has_s)
    got = keys.distinct(kr, measure_r & has_r)
    out = pd.DataFrame({"unit": work.unit, "producer_id": producers})

    def rows(where: np.ndarray, index: np.ndarray = ix_s) -> np.ndarray:
        return np.bincount(index[where], minlength=count).astype(np.int64)

    out["scheduled"] = rows(measure_s & has_s)
    out["sent"] = rows(measure_s & sent_ok)
    out["acknowledged"] = rows(measure_s & acked_ok)
    out["got"] = keys.count(keys.both(scheduled, got))
    out["sent_lost"] = keys.count(keys.minus(keys.distinct(ks, measure_s & sent_ok & has_s), got))
    out["acked_lost"] = keys.count(keys.minus(keys.distinct(ks, measure_s & acked_ok & has_s), got))
    out["dupes"] = rows(measure_r & has_r, ix_r) - keys.count(got)
    out["producer_rows"] = np.bincount(ix_s, minlength=count).astype(np.int64)
    seq_rows = rows(has_s)
    out["duplicate_seqs"] = seq_rows - keys.count(keys.distinct(ks, has_s))
    out["min_seq"] = _extreme(np.minimum, ix_s, sent["seq"].values, has_s, count)
    out["max_seq"] = _extreme(np.maximum, ix_s, sent["seq"].values, has_s, count)
    out["null_seq"] = out["producer_rows"] - seq_rows
    out["null_intended"] = rows(~sent["intended_ns"].valid)
    out["null_phase"] = rows(~sent["phase"].valid)
    pairs = {
        "min_lag_ns": (ix_s, _difference(sent["sent_ns"], sent["intended_ns"])),
        "min_e2e_intended_ns": (ix_r, _difference(received["received_ns"], received["intended_ns"])),
        "min_e2e_sent_ns": (ix_r, _difference(received["received_ns"], received["sent_ns"])),
        "min_ack_intended_ns": (ix_s, _difference(sent["acked_ns"], sent["intended_ns"])),
        "min_ack_sent_ns": (ix_s, _difference(sent["acked_ns"], sent["sent_ns"])),
    }
    for name, (index, (values, valid)) in pairs.items():
        out[name] = _extreme(np.minimum, index, values, valid, count)
    return out
