"""The exact values of located ranks, picked from the candidates a task keeps as it streams a series' samples
again (exact.pick's rule: the local_rank-th smallest value of the group's located bucket)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spark_jobs.errors import AnalyticsError
from spark_jobs.levels import LEADER, MERGED, SECOND, SECOND_SHIFT

from .samples import Bucketed

ON = ["g", "leader", "sec", "bucket"]  # a level's group (LEVEL_KEYS but level, metric, basis) and bucket


def candidates(b: Bucketed, cell_ix: int, level: int, buckets: np.ndarray) -> pd.DataFrame:
    """ON and value of the samples at `level` (analysis.at_levels' rule) whose bucket is in `buckets`:
    MERGED and LEADER group a cell's measure phase (LEADER only samples that carry one), REPEAT a unit's,
    SECOND a unit's seconds at their coarse bucket."""
    bucket = b.bucket >> SECOND_SHIFT if level == SECOND else b.bucket
    keep = _member(bucket, buckets)
    if level != SECOND:
        keep &= b.measure
    if level == LEADER:
        keep &= b.leader.valid
    count = int(keep.sum())
    none = np.full(count, -1, np.int64)
    return pd.DataFrame(
        {
            "g": np.full(count, cell_ix, np.int64) if level in (MERGED, LEADER) else b.unit[keep],
            "leader": b.leader.values[keep] if level == LEADER else none,
            "sec": b.sec[keep] if level == SECOND else none,
            "bucket": bucket[keep],
            "value": b.value[keep],
        }
    )


def _any_level(levels: dict[int, tuple[np.ndarray, pd.DataFrame]]) -> tuple[int, np.ndarray]:
    """A lookup table over fine buckets (from `low`, one slot of False each side) of the buckets any level
    located (a coarse SECOND bucket as its fine ones)."""
    fine = [
        (buckets << SECOND_SHIFT)[:, None] + np.arange(1 << SECOND_SHIFT) if level == SECOND else buckets[:, None]
        for level, (buckets, _) in levels.items()
    ]
    every = np.concatenate([f.ravel() for f in fine]) if fine else np.zeros(1, np.int64)
    low = int(every.min())
    table = np.zeros(int(every.max()) - low + 3, bool)
    table[every - low + 1] = True
    return low, table


def _member(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.isin for small ints: a lookup table over the wanted values' range (np.isin sorts)."""
    low, high = int(wanted.min()), int(wanted.max())
    table = np.zeros(high - low + 1, bool)
    table[wanted - low] = True
    inside = (values >= low) & (values <= high)
    found = np.zeros(len(values), bool)
    found[inside] = table[values[inside] - low]
    return found


class Picks:
    """One series' located buckets whose samples must be looked at (locate.unknown's rows), their candidates
    gathered a batch at a time, and the exact values picked from them at the end. A candidate is kept as its
    value and the number of its group × bucket (12 bytes), only where that group wants that bucket."""

    def __init__(self, cell_ix: int, unknown: pd.DataFrame):
        self.cell_ix = cell_ix
        self.unknown = unknown.astype({c: np.int64 for c in ON})
        self.levels: dict[int, tuple[np.ndarray, pd.DataFrame]] = {}
        for level, rows in self.unknown.groupby("level", sort=False):
            wanted = rows[ON].drop_duplicates(ignore_index=True)
            self.levels[int(level)] = (
                rows["bucket"].unique(),
                wanted.assign(_id=np.arange(len(wanted), dtype=np.int32)),
            )
        self.found: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {level: [] for level in self.levels}
        self.low, self.table = _any_level(self.levels)

    def add(self, b: Bucketed) -> None:
        """Keeps the batch's candidates: first the samples whose bucket some level located (one lookup), then,
        of those few, the ones whose group located it."""
        at = np.clip(b.bucket - self.low + 1, 0, len(self.table) - 1)
        some = self.table[at]
        if not some.any():
            return
        b = b.take(some)
        for level, (buckets, wanted) in self.levels.items():
            joined = candidates(b, self.cell_ix, level, buckets).merge(wanted, on=ON)
            if len(joined):
                self.found[level].append((joined["_id"].to_numpy(np.int32), joined["value"].to_numpy(np.int64)))

    def values(self) -> pd.DataFrame:
        """LEVEL_KEYS, percentile, value of every row of `unknown`: the local_rank-th smallest candidate of its
        group × bucket (exact.pick's rule)."""
        out = []
        for level, rows in self.unknown.groupby("level", sort=False):
            _, wanted = self.levels[int(level)]
            found = self.found[int(level)]
            ids = np.concatenate([i for i, _ in found]) if found else np.empty(0, np.int32)
            values = np.concatenate([v for _, v in found]) if found else np.empty(0, np.int64)
            order = np.lexsort([values, ids])
            starts = np.searchsorted(ids[order], np.arange(len(wanted)))
            rows = rows.merge(wanted, on=ON)
            held = np.diff(np.r_[starts, len(ids)])[rows["_id"].to_numpy()]
            if (rows["local_rank"].to_numpy() > held).any():
                raise AnalyticsError(f"pick: a located bucket holds fewer samples than its local_rank (level {level})")
            at = starts[rows["_id"].to_numpy()] + rows["local_rank"].to_numpy() - 1
            first = rows.iloc[0]
            out.append(
                rows.assign(level=level, metric=first["metric"], basis=first["basis"], value=values[order][at])[
                    ["level", "g", "metric", "basis", "leader", "sec", "percentile", "value"]
                ]
            )
        columns = ["level", "g", "metric", "basis", "leader", "sec", "percentile", "value"]
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)
