"""The exact method's driver-side step (spark_jobs.locate) against numpy, without Spark: a bucket table made
here, its ranks located, the unknown buckets' values picked by sorting just them, every statistic compared."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench_tasks import PERCENTILES, required_samples, summarize
from spark_jobs import locate

COLUMNS = {p: f"p{p.replace('.', '_')}_ns" for p in PERCENTILES}


def _samples(groups: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per value, bucketed by a monotone function standing in for exact.log_bucket."""
    frame = pd.DataFrame(
        {"g": np.concatenate([[g] * len(v) for g, v in groups.items()]), "v": np.concatenate(list(groups.values()))}
    )
    return frame.assign(bucket=np.floor(np.log2(frame["v"] + 1) * 8).astype(np.int64))


def _bucket_table(samples: pd.DataFrame) -> pd.DataFrame:
    """Several partial rows per group × bucket (split by parity), as Spark's partial aggregates arrive."""
    parts = samples.assign(part=samples.index % 2).groupby(["g", "bucket", "part"])["v"]
    table = parts.agg(n="count", vmin="min", vmax="max", vsum="sum").reset_index()
    squares = samples.assign(part=samples.index % 2, sq=samples["v"].astype(float) ** 2)
    table["vsq"] = squares.groupby(["g", "bucket", "part"])["sq"].sum().to_numpy()
    return table.drop(columns="part")


def _summary(groups: dict[str, np.ndarray]) -> dict[str, dict]:
    samples = _samples(groups)
    placed = locate.place(_bucket_table(samples), ["g"])
    located = locate.ranks(placed, ["g"], PERCENTILES)
    picked = []
    for row in locate.unknown(located).itertuples(index=False):
        inside = np.sort(samples.loc[(samples["g"] == row.g) & (samples["bucket"] == row.bucket), "v"].to_numpy())
        picked.append({"g": row.g, "percentile": row.percentile, "value": int(inside[row.local_rank - 1])})
    values = pd.concat(
        [pd.DataFrame(picked, columns=["g", "percentile", "value"]), locate.known_values(located, ["g"])]
    )
    summary = locate.finish(locate.group_stats(placed, ["g"]), values, ["g"], COLUMNS)
    return {row["g"]: row for row in summary.to_dict("records")}


def test_every_statistic_equals_numpy() -> None:
    rng = np.random.default_rng(11)
    groups = {
        "lognormal": rng.lognormal(12, 1.2, 50_000).astype(np.int64),
        "pareto": (rng.pareto(1.5, 12_345) * 1e5).astype(np.int64),
        "stall": np.concatenate([np.full(999, 400_000), [1_400_000_000] * 2]).astype(np.int64),
        "constant": np.full(2_000, 5, dtype=np.int64),
    }
    got = _summary(groups)
    for name, values in groups.items():
        want, row = summarize(values), got[name]
        assert (row["count"], row["min_ns"], row["max_ns"]) == (want.count, want.min_ns, want.max_ns), name
        assert row["mean_ns"] == pytest.approx(values.mean(), rel=1e-12), name
        assert row["stddev_ns"] == pytest.approx(values.std(), rel=1e-9, abs=1e-9), name
        for p, column in COLUMNS.items():
            value = row[column]
            assert (None if pd.isna(value) else int(value)) == want.percentiles[p], (name, p)


def test_too_few_samples_are_null_and_listed() -> None:
    row = _summary({"ten": np.arange(1, 11, dtype=np.int64)})["ten"]
    assert (row[COLUMNS["50"]], row[COLUMNS["90"]]) == (5, 9)
    assert pd.isna(row[COLUMNS["99"]])
    assert row["unsupported"] == [p for p in PERCENTILES if required_samples(p) > 10]


def test_a_percentile_no_group_wants_is_null_but_not_unsupported() -> None:
    samples = _samples({"a": np.arange(1, 1001, dtype=np.int64)})
    placed = locate.place(_bucket_table(samples), ["g"])
    located = locate.ranks(placed, ["g"], PERCENTILES, lambda p, rows: np.full(len(rows), p == "50"))
    assert set(located["percentile"]) == {"50"}
    summary = locate.finish(locate.group_stats(placed, ["g"]), locate.known_values(located, ["g"]), ["g"], COLUMNS)
    assert pd.isna(summary.loc[0, COLUMNS["99"]])  # 1,000 samples support p99: null because no level asked
    assert summary.loc[0, "unsupported"] == [p for p in PERCENTILES if required_samples(p) > 1000]
