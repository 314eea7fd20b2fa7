"""The levels an analysis states its statistics at, and the driver's view of them: pandas and numpy only, so a
Python task (spark_jobs.cellpass) uses them without loading the Spark side (spark_jobs.analysis)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench_tasks import PERCENTILES
from spark_jobs import locate
from spark_jobs.metrics import LAG

NS_PER_S = 1_000_000_000
MERGED, LEADER, REPEAT, SECOND = range(4)
LEVELS = {
    MERGED: "a cell over all its repeats (measure phase): the percentile table's overall rows",
    LEADER: "a cell × partition leader (measure phase, receipts that carry one): its per-leader rows",
    REPEAT: "one repeat of a cell (measure phase): percentiles_by_repeat, and the send lag the gate checks",
    SECOND: "one repeat × second of intended time (every phase): the timeline",
}
LEVEL_KEYS = ("level", "g", "metric", "basis", "leader", "sec")  # g: cell_ix (MERGED, LEADER) or unit
TIMELINE_PERCENTILES = ("50", "99")
SECOND_SHIFT = 2  # the per-second level counts coarser buckets (bucket >> 2: 32 a doubling), a smaller table
LAG_PERCENTILE = "99.9"

WHOLE, TIMED, DONE = range(3)  # the kinds of rows bucket_sums gives
WHOLE_COLUMNS = ("unit", "metric", "basis", "leader", "bucket")
DONE_COLUMNS = ("unit", "metric", "basis", "sec")


def wanted_at(percentile: str, rows: pd.DataFrame) -> np.ndarray:
    """Which rows' groups state `percentile`: all percentiles at the cell and repeat levels (the lag only its
    p99.9), p50 and p99 per second."""
    level, lag = rows["level"].to_numpy(), rows["metric"].to_numpy() == LAG
    wanted = np.zeros(len(rows), dtype=bool)
    if percentile in PERCENTILES:
        wanted |= (level <= LEADER) | ((level == REPEAT) & ~lag)
    if percentile == LAG_PERCENTILE:
        wanted |= (level == REPEAT) & lag
    if percentile in TIMELINE_PERCENTILES:
        wanted |= level == SECOND
    return wanted


def _level(rows: pd.DataFrame, level: int, g: str, leader: str | None, sec: str | None, bucket: str) -> pd.DataFrame:
    none = np.full(len(rows), -1, dtype=np.int64)
    keyed = {
        "level": np.full(len(rows), level, dtype=np.int64),
        "g": rows[g].to_numpy(np.int64),
        "metric": rows["metric"].to_numpy(np.int64),
        "basis": rows["basis"].to_numpy(np.int64),
        "leader": none if leader is None else rows[leader].to_numpy(np.int64),
        "sec": none if sec is None else rows[sec].to_numpy(np.int64),
        "bucket": rows[bucket].to_numpy(np.int64),
    }
    return pd.DataFrame({**keyed, **{c: rows[c].to_numpy() for c in locate.SUMS}})


def level_frame(whole: pd.DataFrame, timed: pd.DataFrame) -> pd.DataFrame:
    """bucket_sums' WHOLE and TIMED rows (with cell_ix) at every level, keyed by LEVEL_KEYS and bucket: what
    at_levels makes of the samples, from the sums the levels read."""
    kept, led = whole["metric"] != LAG, whole["leader"].notna()
    return pd.concat(
        [
            _level(whole[kept], MERGED, "cell_ix", None, None, "bucket"),
            _level(whole[kept & led], LEADER, "cell_ix", "leader", None, "bucket"),
            _level(whole, REPEAT, "unit", None, None, "bucket"),
            _level(timed[timed["metric"] != LAG], SECOND, "unit", None, "sec", "bucket"),
        ],
        ignore_index=True,
    )
