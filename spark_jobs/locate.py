"""The exact method's small middle step (spark_jobs.exact) on the driver, in pandas: a collected bucket table's
running counts, each group's statistics, where each wanted rank lies, and the finished summary rows.

A bucket table is small (groups × log buckets: ~10^4–10^5 rows for 10–50 M samples), but each of these steps
as a Spark query cost a job's planning and scheduling, 0.3–1 s apiece on a 2-core host whatever the data,
several seconds of every analysis. Here they take milliseconds; only the passes over the samples (the bucket
count and the pick) stay in Spark. The arithmetic is the Spark version's: the rank is max(1, ceil(n · q)) in
float64 as numpy forms it, and counts, minima, maxima and sums are exact integers; only the float moments (mean,
standard deviation) may differ in their last bits with the order of summation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

import numpy as np
import pandas as pd

from bench_tasks import required_samples

SUMS = {"n": "sum", "vmin": "min", "vmax": "max", "vsum": "sum", "vsq": "sum"}  # merging bucket partials
Wanted = Callable[[str, pd.DataFrame], np.ndarray]  # percentile, placed rows -> which rows' groups want it


def summed(rows: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Bucket partials (exact.PARTIALS) merged per `keys` (null keys kept as a group), sorted by them."""
    return rows.groupby(list(keys), sort=True, dropna=False).agg(SUMS).reset_index()


def place(rows: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """One row per group × bucket in bucket order: the merged partials, the running count `_cum` below and
    including the bucket, the group's `_total` and `_mean`, and `_m2`, the bucket's sum of squared deviations
    from its own mean."""
    placed = summed(rows, [*keys, "bucket"])
    group = placed.groupby(list(keys), sort=False, dropna=False)
    placed["_cum"] = group["n"].cumsum()
    placed["_total"] = group["n"].transform("sum")
    placed["_mean"] = group["vsum"].transform("sum") / placed["_total"]
    m2 = placed["vsq"] - placed["vsum"].astype(np.float64) ** 2 / placed["n"]
    placed["_m2"] = np.maximum(0.0, m2)
    return placed


def group_stats(placed: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """keys, count, min_ns, max_ns, mean_ns, stddev_ns (population, like numpy): one row per group, the spread
    merged from the buckets' own (Chan's formula)."""
    spread = placed["_m2"] + placed["n"] * (placed["vsum"] / placed["n"] - placed["_mean"]) ** 2
    grouped = placed.assign(_spread=spread).groupby(list(keys), sort=False, dropna=False)
    stats = grouped.agg(
        count=("_total", "first"),
        min_ns=("vmin", "min"),
        max_ns=("vmax", "max"),
        mean_ns=("_mean", "first"),
        _spread=("_spread", "sum"),
    ).reset_index()
    stats["stddev_ns"] = np.sqrt(stats.pop("_spread") / stats["count"])
    return stats


def rank_of(percentile: str, total: np.ndarray) -> np.ndarray:
    """The 1-based rank of `percentile` among `total` samples: max(1, ceil(total · q)), q in float64."""
    quantile = float(Decimal(percentile) / Decimal(100))
    return np.maximum(1, np.ceil(total.astype(np.float64) * quantile)).astype(np.int64)


def ranks(
    placed: pd.DataFrame, keys: Sequence[str], percentiles: Sequence[str], wanted: Wanted | None = None
) -> pd.DataFrame:
    """keys, bucket, percentile, local_rank, known: the bucket holding each wanted, supported percentile of a
    group, the percentile's rank inside it, and the value itself where the bucket's min or max is it (else
    null: the bucket's samples must be looked at)."""
    total, cum = placed["_total"].to_numpy(), placed["_cum"].to_numpy()
    below = cum - placed["n"].to_numpy()
    found = []
    for p in percentiles:
        k = rank_of(p, total)
        hit = (below < k) & (k <= cum) & (total >= required_samples(p))
        if wanted is not None:
            hit &= wanted(p, placed)
        rows = placed.loc[hit, [*keys, "bucket", "n", "vmin", "vmax"]]
        found.append(rows.assign(percentile=p, local_rank=(k - below)[hit]))
    located = pd.concat(found, ignore_index=True)
    local, vmin, vmax = located["local_rank"], located["vmin"], located["vmax"]
    first = (vmin == vmax) | (local == 1)
    known = pd.Series(pd.NA, index=located.index, dtype="Int64")
    known[local == located["n"]] = vmax[local == located["n"]]
    known[first] = vmin[first]
    return located.drop(columns=["n", "vmin", "vmax"]).assign(known=known)


def unknown(located: pd.DataFrame) -> pd.DataFrame:
    """The located buckets whose samples must be looked at (keys, bucket, percentile, local_rank)."""
    return located[located["known"].isna()].drop(columns="known")


def known_values(located: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """keys, percentile, value of the located percentiles whose bucket's min or max is the value."""
    rows = located[located["known"].notna()]
    return rows[[*keys, "percentile"]].assign(value=rows["known"].astype(np.int64))


def finish(stats: pd.DataFrame, values: pd.DataFrame, keys: Sequence[str], columns: Mapping[str, str]) -> pd.DataFrame:
    """One row per group: keys, count, min_ns, max_ns, mean_ns, stddev_ns, one column per percentile p (named
    `columns[p]`; null where the group did not want it or is unsupported) and `unsupported` (the percentiles left
    null for lack of samples).
    `values`: keys, percentile, value (picked and known)."""
    table = stats
    for p, name in columns.items():
        picked = values[values["percentile"] == p].groupby(list(keys), dropna=False)["value"].max()
        table = table.merge(picked.rename(name).astype("Int64").reset_index(), on=list(keys), how="left")
    count = table["count"].to_numpy()
    short = {p: count < required_samples(p) for p in columns}
    for p, name in columns.items():
        table.loc[short[p], name] = pd.NA
    unsupported = [[p for p in columns if short[p][i]] for i in range(len(table))]
    table["unsupported"] = pd.Series(unsupported, index=table.index, dtype=object)  # lists, even with no rows
    return table


Picker = Callable[[pd.DataFrame], pd.DataFrame]  # unknown's rows -> keys, percentile, value of each


def located_values(
    placed: pd.DataFrame, keys: Sequence[str], pick: Picker, percentiles: Sequence[str], wanted: Wanted | None = None
) -> pd.DataFrame:
    """keys, percentile, value of every wanted, supported percentile of the groups of `placed` (place): ranks
    located, the values no bucket's min or max gives found by `pick` (in Spark, or in a task holding the
    samples: spark_jobs.cellpass)."""
    located = ranks(placed, keys, percentiles, wanted)
    return pd.concat([pick(unknown(located)), known_values(located, keys)], ignore_index=True)


def summary_rows(
    placed: pd.DataFrame, keys: Sequence[str], pick: Picker, columns: Mapping[str, str], wanted: Wanted | None = None
) -> pd.DataFrame:
    """finish's rows for the groups of `placed`, their values found by located_values."""
    values = located_values(placed, keys, pick, list(columns), wanted)
    return finish(group_stats(placed, keys), values, keys, columns)
