"""Grouped partials in numpy, and one series' bucket sums (spark_jobs.analysis.bucket_sums' three kinds)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spark_jobs.errors import AnalyticsError
from spark_jobs.exact import PARTIALS
from spark_jobs.levels import DONE, SECOND_SHIFT, TIMED, WHOLE

from .read import Col
from .samples import Bucketed

NO_LEADER = -(2**31) - 1  # a null leader's stand-in as a group key (outside int32)


DENSE_LIMIT = 1 << 22  # key spaces up to this many slots (or 4 per value) are summed in arrays, without a sort


def _slots(keys: dict[str, np.ndarray], rows: int) -> tuple[np.ndarray, int, list[tuple[str, int, int, int]]]:
    """The int64 `keys` columns packed into one slot number by their spans: slots, their count, the spans."""
    slot, radix, spans = np.zeros(rows, np.int64), 1, []
    for name, column in keys.items():
        low = int(column.min()) if len(column) else 0
        span = (int(column.max()) - low + 1) if len(column) else 1
        if radix * span >= 2**62:
            raise AnalyticsError(f"bucket sums: the group keys up to {name} span {radix * span:,} values")
        slot += (column - low) * radix
        spans.append((name, low, span, radix))
        radix *= span
    return slot, radix, spans


def _unpacked(sums: dict[str, np.ndarray], spans: list[tuple[str, int, int, int]]) -> dict[str, np.ndarray]:
    slots = sums.pop("slot")
    return {**{name: (slots // step) % span + low for name, low, span, step in spans}, **sums}


def grouped(keys: dict[str, np.ndarray], values: np.ndarray) -> dict[str, np.ndarray]:
    """One row per distinct combination of the int64 `keys` columns, with exact.PARTIALS of its `values`
    (n, vmin, vmax, vsum exact in int64, vsq in float64). The keys are packed into one int64 slot number by
    their spans; a small slot space is summed in place (ufunc.at), a large one sorted."""
    slot, radix, spans = _slots(keys, len(values))
    sums = _dense(slot, values, radix) if radix <= max(DENSE_LIMIT, 4 * len(values)) else _sorted(slot, values)
    return _unpacked(sums, spans)


def merged(parts: list[dict[str, np.ndarray]], names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """grouped's rows of several batches as one row per distinct key (n, vsum and vsq summed, vmin and vmax
    kept): the partials of the batches' samples together."""
    joined = {c: np.concatenate([p[c] for p in parts]) for c in (*names, *PARTIALS)}
    slot, _, spans = _slots({name: joined[name] for name in names}, len(joined["n"]))
    order = np.argsort(slot, kind="stable")
    ordered = slot[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if len(ordered) else np.empty(0, np.int64)
    reduce = {"n": np.add, "vmin": np.minimum, "vmax": np.maximum, "vsum": np.add, "vsq": np.add}
    sums = {c: f.reduceat(joined[c][order], starts) if len(starts) else joined[c][:0] for c, f in reduce.items()}
    return _unpacked({"slot": ordered[starts], **sums}, spans)


class Partials:
    """One kind of bucket sums of one series, fed a batch at a time: each batch's grouped rows, merged whenever
    the rows waiting outgrow those already merged (so they hold at most about twice the final table)."""

    def __init__(self, names: tuple[str, ...]):
        self.names = names
        self.parts: list[dict[str, np.ndarray]] = []
        self.waiting, self.done = 0, 0

    def add(self, keys: dict[str, np.ndarray], values: np.ndarray) -> None:
        if not len(values):
            return
        self.parts.append(grouped(keys, values))
        self.waiting += len(self.parts[-1]["n"])
        if self.waiting > max(MERGE_ROWS, self.done):
            self.parts = [merged(self.parts, self.names)]
            self.waiting, self.done = 0, len(self.parts[0]["n"])

    def frame(self) -> pd.DataFrame:
        if not self.parts:
            return pd.DataFrame(
                {c: np.empty(0, np.float64 if c == "vsq" else np.int64) for c in (*self.names, *PARTIALS)}
            )
        return pd.DataFrame(merged(self.parts, self.names) if len(self.parts) > 1 else self.parts[0])


MERGE_ROWS = 1 << 16  # grouped rows a Partials lets wait before merging them


def _dense(slot: np.ndarray, values: np.ndarray, slots: int) -> dict[str, np.ndarray]:
    n = np.bincount(slot, minlength=slots)
    used = np.flatnonzero(n)
    vmin, vmax = np.full(slots, np.iinfo(np.int64).max), np.full(slots, np.iinfo(np.int64).min)
    vsum = np.zeros(slots, np.int64)
    np.minimum.at(vmin, slot, values)
    np.maximum.at(vmax, slot, values)
    np.add.at(vsum, slot, values)  # exact in int64 (bincount's weights are doubles)
    vsq = np.bincount(slot, weights=values.astype(np.float64) ** 2, minlength=slots)
    return {"slot": used, "n": n[used], "vmin": vmin[used], "vmax": vmax[used], "vsum": vsum[used], "vsq": vsq[used]}


def _sorted(slot: np.ndarray, values: np.ndarray) -> dict[str, np.ndarray]:
    order = np.argsort(slot, kind="stable")
    ordered, v = slot[order], values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return {
        "slot": ordered[starts],
        "n": np.diff(np.r_[starts, len(v)]).astype(np.int64),
        "vmin": np.minimum.reduceat(v, starts),
        "vmax": np.maximum.reduceat(v, starts),
        "vsum": np.add.reduceat(v, starts),
        "vsq": np.add.reduceat(v.astype(np.float64) ** 2, starts),
    }


def leader_key(leader: Col) -> np.ndarray:
    return np.where(leader.valid, leader.values, NO_LEADER)


def leader_column(keys: np.ndarray) -> pd.array:
    """Back from leader_key: the stand-in as null."""
    missing = keys == NO_LEADER
    return pd.arrays.IntegerArray(np.where(missing, 0, keys).astype(np.int32), missing)


SUM_COLUMNS = (
    "kind",
    "unit",
    "metric",
    "basis",
    "leader",
    "measure",
    "sec",
    "bucket",
    "n",
    "vmin",
    "vmax",
    "vsum",
    "vsq",
)


class SeriesSums:
    """SUM_COLUMNS of one series of a cell, fed its samples a batch at a time (Bucketed): WHOLE, the measure
    phase per unit × leader × bucket; TIMED, every phase per unit × second × coarse bucket; DONE, the samples
    done per unit × second."""

    def __init__(self, metric: int, basis: int):
        self.metric, self.basis = metric, basis
        self.whole = Partials(("unit", "leader", "bucket"))
        self.timed = Partials(("unit", "sec", "bucket"))
        self.done = Partials(("unit", "sec"))

    def add(self, b: Bucketed) -> None:
        m = b.measure
        self.whole.add({"unit": b.unit[m], "leader": leader_key(b.leader)[m], "bucket": b.bucket[m]}, b.value[m])
        self.timed.add({"unit": b.unit, "sec": b.sec, "bucket": b.bucket >> SECOND_SHIFT}, b.value)
        self.done.add({"unit": b.unit, "sec": b.done_sec}, b.value)

    def frame(self) -> pd.DataFrame:
        whole = self.whole.frame()
        whole = whole.assign(kind=WHOLE, measure=True, sec=pd.NA, leader=leader_column(whole["leader"].to_numpy()))
        timed = self.timed.frame().assign(kind=TIMED, leader=pd.NA, measure=pd.NA)
        done = self.done.frame().assign(kind=DONE, leader=pd.NA, measure=pd.NA, bucket=pd.NA)
        parts = [part.astype(NULLABLE) for part in (whole, timed, done)]  # typed first: no all-null object column
        frame = pd.concat(parts, ignore_index=True).assign(metric=self.metric, basis=self.basis)
        return frame[list(SUM_COLUMNS)]


NULLABLE = {"leader": "Int32", "measure": "boolean", "sec": "Int64", "bucket": "Int64"}
