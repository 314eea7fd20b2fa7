"""A repeated cell (matrix `repeats:`) through the Spark tables, the gate and publishing: merged percentiles
equal numpy over every repeat's samples together, each repeat's own row equals numpy over its samples, and
the spread (min/median/max, JLBH % variation) equals bench_tasks.core.variation on those per-repeat values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from bench_tasks import PERCENTILES, RunInfo, summarize
from bench_tasks.core.variation import spread
from spark_jobs import lakeio
from spark_jobs.exact import percentile_column
from spark_jobs.pipeline import run_analysis
from spark_jobs.repeats import STATISTIC_COLUMNS, stat_name, variation_column
from tests.spark.synth import SynthCell, received_table, sent_table, write_cell

REPEATS = 3
STATS = {**{p: percentile_column(p) for p in PERCENTILES}, "max": "max_ns"}


def _stats(values: np.ndarray) -> dict[str, int | None]:
    """numpy's exact inverted-CDF percentiles (bench_tasks.summarize, the generator's own tables)."""
    summary = summarize(values)
    return {**summary.percentiles, "max": summary.max_ns}


def _land_repeats(lake: Path) -> tuple[RunInfo, list[np.ndarray]]:
    """Three repeats of one core-NATS cell (different seeds, so they disagree) and one cell run once."""
    run = RunInfo(run_id="repeated-run", run_date="2026-01-03")
    samples = []
    for repeat in range(1, REPEATS + 1):
        cell = SynthCell("rep", seed=repeat, repeat=repeat, repeats=REPEATS, lag_ns=20_000 * repeat)
        sent = sent_table(cell, 0, acked=False)
        received = received_table(cell, sent)
        write_cell(lake, run, cell, received=received, sent=[sent])
        measure = received.filter(received["phase"].to_numpy(zero_copy_only=False) == "measure")
        samples.append(measure["received_ns"].to_numpy() - measure["intended_ns"].to_numpy())
    write_cell(lake, run, SynthCell("once", seed=9))
    return run, samples


def test_repeats_merge_spread_and_publish(spark: SparkSession, tmp_path: Path) -> None:
    run, samples = _land_repeats(tmp_path)
    assert sorted(p.name for p in (tmp_path / "raw").rglob("repeat=*")) == [f"repeat={r}" for r in (1, 2, 3)]

    published = run_analysis(spark, tmp_path, run.run_id, extra_tables=False)  # the gate passes
    ref = lakeio.find_run(tmp_path, run.run_id)

    merged = [r for r in lakeio.read_table(spark, tmp_path, "percentiles", [ref]).collect() if r.leader is None]
    rep = {(r.metric, r.basis): r.asDict() for r in merged if r.cell_id == "rep"}
    row = rep[("e2e", "intended")]
    everything = np.concatenate(samples)
    assert row["repeats"] == REPEATS and row["count"] == everything.size
    assert {p: row[c] for p, c in STATS.items()} == _stats(everything)  # merged samples, never averaged
    assert row["scheduled"] == sum(s.size for s in samples)

    by_repeat = lakeio.read_table(spark, tmp_path, "percentiles_by_repeat", [ref]).where(
        "cell_id = 'rep' AND metric = 'e2e' AND basis = 'intended'"
    )
    per_repeat = {r.repeat: r.asDict() for r in by_repeat.collect()}
    assert sorted(per_repeat) == [1, 2, 3]
    for repeat, values in enumerate(samples, 1):
        assert {p: per_repeat[repeat][c] for p, c in STATS.items()} == _stats(values)

    spread_rows = lakeio.read_table(spark, tmp_path, "repeat_spread", [ref]).collect()
    assert {r.cell_id for r in spread_rows} == {"rep"}  # a cell run once has no spread
    got = next(r.asDict() for r in spread_rows if (r.metric, r.basis) == ("e2e", "intended"))
    for column in STATISTIC_COLUMNS:
        want = spread(per_repeat[r][column] for r in (1, 2, 3))
        name = stat_name(column)
        if want is None:
            assert got[f"{name}_values"] == 0
            continue
        assert (got[f"{name}_min_ns"], got[f"{name}_median_ns"], got[f"{name}_max_ns"]) == (
            want.min,
            want.median,
            want.max,
        )
        assert got[variation_column(column)] == (
            None if want.variation_pct is None else pytest.approx(want.variation_pct, rel=1e-12)
        )
        assert row[variation_column(column)] == got[variation_column(column)]  # carried into the table
    assert got["p50_variation_pct"] > 0  # the repeats really differ (their send lags differ)
    once = next(r for r in merged if r.cell_id == "once" and r.metric == "e2e" and r.basis == "intended")
    assert once.repeats == 1 and once.p50_variation_pct is None

    assert "Run-to-run variation over 3 repeats" in (published / "percentiles.md").read_text()
    assert (published / "repeats.csv").read_text().count("\n") == 1 + 2  # header, e2e × 2 bases
    history = pq.read_table(tmp_path / "history" / "percentiles").to_pylist()
    assert {r["p99_variation_pct"] is not None for r in history if r["cell_id"] == "rep" and r["leader"] is None} == {
        True
    }
