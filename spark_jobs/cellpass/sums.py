"""Grouped partials in numpy, and one series' bucket sums (spark_jobs.analysis.bucket_sums' three kinds)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spark_jobs.errors import AnalyticsError
from spark_jobs.levels import DONE, SECOND_SHIFT, TIMED, WHOLE

from .read import Col
from .samples import Bucketed

NO_LEADER = -(2**31) - 1  # a null leader's stand-in as a group key (outside int32)


DENSE_LIMIT = 1 << 22  # key spaces up to this many slots (or 4 per value) are summed in arrays, without a sort


def grouped(keys: dict[str, np.ndarray], values: np.ndarray) -> pd.DataFrame:
    """One row per distinct combination of the int64 `keys` columns, with exact.PARTIALS of its `values`
    (n, vmin, vmax, vsum exact in int64, vsq in float64). The keys are packed into one int64 slot number by
    their spans; a small slot space is summed in place (ufunc.at), a large one sorted."""
    slot, radix, spans = np.zeros(len(values), np.int64), 1, []
    for name, column in keys.items():
        low = int(column.min()) if len(column) else 0
        span = (int(column.max()) - low + 1) if len(column) else 1
        if radix * span >= 2**62:
            raise AnalyticsError(f"bucket sums: the group keys up to {name} span {radix * span:,} values")
        slot += (column - low) * radix
        spans.append((name, low, span, radix))
        radix *= span
    sums = _dense(slot, values, radix) if radix <= max(DENSE_LIMIT, 4 * len(values)) else _sorted(slot, values)
    slots = sums.pop("slot")
    out = {name: (slots // step) % span + low for name, low, span, step in spans}
    return pd.DataFrame({**out, **sums})


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


def series_sums(metric: int, basis: int, b: Bucketed) -> pd.DataFrame:
    """SUM_COLUMNS of one series of a cell: WHOLE, the measure phase per unit × leader × bucket; TIMED, every
    phase per unit × second × coarse bucket; DONE, the samples done per unit × second."""
    m = b.measure
    whole = grouped({"unit": b.unit[m], "leader": leader_key(b.leader)[m], "bucket": b.bucket[m]}, b.value[m])
    whole = whole.assign(kind=WHOLE, measure=True, sec=pd.NA, leader=leader_column(whole["leader"].to_numpy()))
    timed = grouped({"unit": b.unit, "sec": b.sec, "bucket": b.bucket >> SECOND_SHIFT}, b.value)
    timed = timed.assign(kind=TIMED, leader=pd.NA, measure=pd.NA)
    done = grouped({"unit": b.unit, "sec": b.done_sec}, b.value)
    done = done.assign(kind=DONE, leader=pd.NA, measure=pd.NA, bucket=pd.NA)
    parts = [part.astype(NULLABLE) for part in (whole, timed, done)]  # typed first: no all-null object column
    frame = pd.concat(parts, ignore_index=True).assign(metric=metric, basis=basis)
    return frame[list(SUM_COLUMNS)]


NULLABLE = {"leader": "Int32", "measure": "boolean", "sec": "Int64", "bucket": "Int64"}
