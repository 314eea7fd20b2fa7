"""The exact values of located ranks, picked from a series' samples held by the task (exact.pick's rule: the
local_rank-th smallest value of the group's located bucket)."""

from __future__ import annotations

import numpy as np
import pandas as pd

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


def _member(values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.isin for small ints: a lookup table over the wanted values' range (np.isin sorts)."""
    low, high = int(wanted.min()), int(wanted.max())
    table = np.zeros(high - low + 1, bool)
    table[wanted - low] = True
    inside = (values >= low) & (values <= high)
    found = np.zeros(len(values), bool)
    found[inside] = table[values[inside] - low]
    return found


def picked(b: Bucketed, cell_ix: int, unknown: pd.DataFrame) -> pd.DataFrame:
    """LEVEL_KEYS, percentile, value of every row of `unknown` (locate.unknown's, one series of the cell)."""
    out = []
    for level, rows in unknown.groupby("level", sort=False):
        found = candidates(b, cell_ix, int(level), rows["bucket"].unique())
        wanted = rows[[*ON, "percentile", "local_rank"]].astype({c: np.int64 for c in ON})
        joined = found.merge(wanted, on=ON).sort_values("value", kind="stable")
        rank = joined.groupby([*ON, "percentile"], sort=False).cumcount().to_numpy() + 1
        hit = joined[rank == joined["local_rank"].to_numpy()]
        first = rows.iloc[0]
        out.append(
            hit.assign(level=level, metric=first["metric"], basis=first["basis"])[
                ["level", "g", "metric", "basis", "leader", "sec", "percentile", "value"]
            ]
        )
    columns = ["level", "g", "metric", "basis", "leader", "sec", "percentile", "value"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)
