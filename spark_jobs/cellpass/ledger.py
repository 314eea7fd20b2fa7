"""One unit's message accounting and the gate's per-producer checks, as spark_jobs.ledger counts them, counted a
batch at a time.

The Spark pass needs 64-message words to avoid joining messages; a task counts the sets directly, as sets of
message keys (keys.KeySpace: a bit per message), and the rest as running per-producer counts and minima."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .facts import UnitWork
from .keys import KeySpace
from .read import Col, Columns

COUNT_COLUMNS = ("scheduled", "sent", "acknowledged", "got", "sent_lost", "acked_lost", "dupes")
CHECK_COLUMNS = ("producer_rows", "duplicate_seqs", "min_seq", "max_seq", "null_seq", "null_intended", "null_phase")
MINIMA = ("min_lag_ns", "min_e2e_intended_ns", "min_e2e_sent_ns", "min_ack_intended_ns", "min_ack_sent_ns")
PRODUCER_COLUMNS = ("unit", "producer_id", *COUNT_COLUMNS, *CHECK_COLUMNS, *MINIMA)  # ledger.per_producer's
ROW_COUNTS = (
    "scheduled",
    "sent",
    "acknowledged",
    "producer_rows",
    "seq_rows",
    "null_intended",
    "null_phase",
    "got_rows",
)
SENT_MINIMA = {"min_lag_ns": ("sent_ns", "intended_ns"), "min_ack_intended_ns": ("acked_ns", "intended_ns")}
SENT_MINIMA["min_ack_sent_ns"] = ("acked_ns", "sent_ns")
RECEIVED_MINIMA = {"min_e2e_intended_ns": ("received_ns", "intended_ns"), "min_e2e_sent_ns": ("received_ns", "sent_ns")}
LEDGER_SENT = ("producer_id", "seq", "intended_ns", "sent_ns", "acked_ns", "phase")
LEDGER_RECEIVED = ("producer_id", "seq", "intended_ns", "sent_ns", "received_ns", "relay_received_ns")
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class Extreme:
    """A running minimum (or maximum) per producer, null where no valid value came."""

    def __init__(self, count: int, ufunc: np.ufunc):
        self.ufunc = ufunc
        self.values = np.full(count, INT64_MAX if ufunc is np.minimum else INT64_MIN, np.int64)
        self.seen = np.zeros(count, bool)

    def add(self, index: np.ndarray, values: np.ndarray, valid: np.ndarray) -> None:
        self.ufunc.at(self.values, index[valid], values[valid])
        self.seen[index[valid]] = True

    def column(self) -> pd.array:
        return pd.arrays.IntegerArray(np.where(self.seen, self.values, 0), ~self.seen)


def _difference(a: Col, b: Col) -> tuple[np.ndarray, np.ndarray]:
    return a.values - b.values, a.valid & b.valid


class Ledger:
    """One unit's producer rows, fed its sent and received batches (LEDGER_SENT, LEDGER_RECEIVED columns)."""

    def __init__(self, work: UnitWork, keys: KeySpace):
        self.work, self.keys, count = work, keys, len(keys.producers)
        self.rows = {name: np.zeros(count, np.int64) for name in ROW_COUNTS}
        self.sets = {name: keys.empty() for name in ("scheduled", "sent", "acked", "seqs", "got")}
        self.minima = {name: Extreme(count, np.minimum) for name in MINIMA}
        self.min_seq, self.max_seq = Extreme(count, np.minimum), Extreme(count, np.maximum)
        self.relayed = False  # whether any receipt carries a relay's receipt time (a chain's final hop)

    def _count(self, name: str, index: np.ndarray, where: np.ndarray | None = None) -> None:
        self.rows[name] += np.bincount(index if where is None else index[where], minlength=len(self.rows[name]))

    def _put(self, name: str, keys: np.ndarray, where: np.ndarray) -> None:
        self.sets[name] = self.keys.add(self.sets[name], keys[where])

    def sent(self, batch: Columns) -> None:
        ix, seq = self.keys.index(batch["producer_id"].values), batch["seq"]
        key, has = self.keys.of(batch["producer_id"].values, seq), seq.valid
        measure = self.work.in_measure(batch["intended_ns"])
        sent_ok, acked_ok = batch["sent_ns"].valid, batch["acked_ns"].valid
        self._count("scheduled", ix, measure & has)
        self._count("sent", ix, measure & sent_ok)
        self._count("acknowledged", ix, measure & acked_ok)
        self._count("producer_rows", ix)
        self._count("seq_rows", ix, has)
        self._count("null_intended", ix, ~batch["intended_ns"].valid)
        self._count("null_phase", ix, ~batch["phase"].valid)
        self._put("scheduled", key, measure & has)
        self._put("sent", key, measure & sent_ok & has)
        self._put("acked", key, measure & acked_ok & has)
        self._put("seqs", key, has)
        self.min_seq.add(ix, seq.values, has)
        self.max_seq.add(ix, seq.values, has)
        for name, (done, start) in SENT_MINIMA.items():
            self.minima[name].add(ix, *_difference(batch[done], batch[start]))

    def received(self, batch: Columns) -> None:
        ix, seq = self.keys.index(batch["producer_id"].values), batch["seq"]
        key = self.keys.of(batch["producer_id"].values, seq)
        measure = self.work.in_measure(batch["intended_ns"]) & seq.valid
        self._count("got_rows", ix, measure)
        self._put("got", key, measure)
        for name, (done, start) in RECEIVED_MINIMA.items():
            self.minima[name].add(ix, *_difference(batch[done], batch[start]))
        self.relayed |= bool(batch["relay_received_ns"].valid.any())

    def frame(self) -> pd.DataFrame:
        """PRODUCER_COLUMNS for every producer with a sent or received row of the unit."""
        keys, sets, rows = self.keys, self.sets, self.rows
        out = pd.DataFrame({"unit": self.work.unit, "producer_id": keys.producers})
        for name in ("scheduled", "sent", "acknowledged"):
            out[name] = rows[name]
        got = keys.count(keys.both(sets["scheduled"], sets["got"]))
        out["got"] = got
        out["sent_lost"] = keys.count(keys.minus(sets["sent"], sets["got"]))
        out["acked_lost"] = keys.count(keys.minus(sets["acked"], sets["got"]))
        out["dupes"] = rows["got_rows"] - keys.count(sets["got"])
        out["producer_rows"] = rows["producer_rows"]
        out["duplicate_seqs"] = rows["seq_rows"] - keys.count(sets["seqs"])
        out["min_seq"], out["max_seq"] = self.min_seq.column(), self.max_seq.column()
        out["null_seq"] = rows["producer_rows"] - rows["seq_rows"]
        out["null_intended"], out["null_phase"] = rows["null_intended"], rows["null_phase"]
        for name in MINIMA:
            out[name] = self.minima[name].column()
        return out
