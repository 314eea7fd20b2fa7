"""Run-to-run variation of repeated cells (matrix `repeats:`), from the per-repeat percentile rows.

For each repeated cell × metric × basis and each statistic (p50 … p99.9999, max): how many repeats support
it, and its min, median and max across the repeats with the % variation as JLBH prints it
(bench_tasks.core.variation, the same formula in plain Python; tests compare the two). The cell's published
percentiles themselves come from all its repeats' samples merged (spark_jobs.percentiles), never from these.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

from bench_tasks import PERCENTILES
from spark_jobs.exact import percentile_column
from spark_jobs.localdata import arrow_table
from spark_jobs.samples import MERGED_KEYS

STATISTIC_COLUMNS: tuple[str, ...] = (*(percentile_column(p) for p in PERCENTILES), "max_ns")


def stat_name(column: str) -> str:
    """`p99_9_ns` → `p99_9`, `max_ns` → `max`: the prefix of a statistic's spread columns."""
    return column.removesuffix("_ns")


def variation_column(column: str) -> str:
    """The percentile table's column holding the % variation of statistic `column` across repeats."""
    return f"{stat_name(column)}_variation_pct"


def _statistic_fields(column: str) -> list[pa.Field]:
    name = stat_name(column)
    spread = [pa.field(f"{name}_{s}_ns", pa.float64()) for s in ("min", "median", "max")]
    return [pa.field(f"{name}_values", pa.int64(), nullable=False), *spread]


SPREAD_SCHEMA = pa.schema(
    [
        *(pa.field(k, pa.string()) for k in MERGED_KEYS),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("basis", pa.string(), nullable=False),
        pa.field("repeats", pa.int64(), nullable=False),
        *(f for c in STATISTIC_COLUMNS for f in _statistic_fields(c)),
        *(pa.field(variation_column(c), pa.float64()) for c in STATISTIC_COLUMNS),
    ]
)


def variation(low: pd.Series, high: pd.Series) -> pd.Series:
    """JLBH's % variation of a statistic across repeats, from its lowest and highest value."""
    denominator = high + low / 2.0
    return (100.0 * (high - low) / denominator).where(denominator != 0, 0.0)


def spread_table(by_repeat: pa.Table) -> pa.Table:
    """One row per repeated cell × metric × basis (overall rows; leader breakdowns are not repeated)."""
    keys = [*MERGED_KEYS, "metric", "basis"]
    rows = by_repeat.select([*keys, "leader", *STATISTIC_COLUMNS]).to_pandas()
    rows = rows[rows["leader"].isna()].astype({c: np.float64 for c in STATISTIC_COLUMNS})
    groups = rows.groupby(keys, sort=True)
    columns: dict[str, pd.Series] = {"repeats": groups.size()}
    for column in STATISTIC_COLUMNS:
        name, values = stat_name(column), groups[column]
        columns |= {
            f"{name}_values": values.count(),
            f"{name}_min_ns": values.min(),
            f"{name}_median_ns": values.median(),
            f"{name}_max_ns": values.max(),
        }
    spread = pd.DataFrame(columns)
    spread = spread[spread["repeats"] > 1].copy()
    for column in STATISTIC_COLUMNS:
        name = stat_name(column)
        varied = variation(spread[f"{name}_min_ns"], spread[f"{name}_max_ns"])
        spread[variation_column(column)] = varied.where(spread[f"{name}_values"] >= 2)
    return arrow_table(spread.reset_index(), SPREAD_SCHEMA)
