"""The Great Expectations gate: suite sizes, a clean run published (idempotently), corrupted raw data
quarantined with the failed expectations named and nothing published."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from bench_tasks import PERCENTILES, RunInfo
from expectations import build_percentile_tables_suite, build_raw_cells_suite, build_raw_samples_suite
from spark_jobs import GateError
from spark_jobs.lakeio import find_run
from spark_jobs.pipeline import GateReport, GateThresholds, gate, publish_run, run_analysis
from tests.spark.synth import SynthCell, received_table, sent_table, write_cell, write_run


def test_suite_expectation_counts() -> None:
    """GX drops invalid expectations silently: each suite must hold exactly what its builder adds."""
    assert len(build_raw_samples_suite().expectations) == 4 + 3 + 5 + 3
    assert len(build_raw_cells_suite().expectations) == 5
    assert len(build_percentile_tables_suite().expectations) == 3 * len(PERCENTILES) + 1 + 6 + 2
    assert len(build_percentile_tables_suite(("50", "99")).expectations) == 3 * 2 + 1 + 6 + 2


def _published(lake: Path) -> list[Path]:
    return sorted(p for area in ("published", "history") for p in (lake / area).rglob("*") if p.is_file())


def test_clean_run_is_published_once(spark: SparkSession, tmp_path: Path) -> None:
    cells = [SynthCell("core0"), SynthCell("js0", mode="jetstream", producers=2, seed=1)]
    run = write_run(tmp_path, cells)
    folder = run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    assert (folder / "percentiles.md").read_text().count("## ") == 2
    csv_rows = (folder / "percentiles.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + 2 + 4  # header, core e2e × 2 bases, jetstream e2e and publish × 2 bases
    history = tmp_path / "history" / "percentiles"
    first = pq.read_table(history).num_rows
    # re-publishing the (already gated) run replaces its history file, never adds to it
    publish_run(tmp_path, find_run(tmp_path, run.run_id), GateReport(run.run_id, success=True))
    assert pq.read_table(history).num_rows == first == 6
    assert not (tmp_path / "quarantine").exists()


def test_corrupted_raw_data_is_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    """A negative latency, missing sequence numbers and a generator that fell behind each fail the gate."""
    run = RunInfo("corrupted-run", "2026-01-03")
    negative = SynthCell("negative")
    sent = sent_table(negative, 0, False)
    received = received_table(negative, sent)
    bad = received["received_ns"].to_numpy().copy()
    bad[1500] = received["intended_ns"][1500].as_py() - 1_000  # arrived before it was due
    write_cell(tmp_path, run, negative, received.set_column(5, "received_ns", pa.array(bad)), [sent])

    gaps = SynthCell("gaps", seed=2)
    sent = sent_table(gaps, 0, False)
    keep = pc.invert(pc.is_in(sent["seq"], pa.array(np.arange(1500, 1510))))
    write_cell(tmp_path, run, gaps, sent=[sent.filter(keep)])

    behind = SynthCell("behind", seed=3)
    sent = sent_table(behind, 0, False)
    late = sent["sent_ns"].to_numpy().copy()
    late[1000:1030] += 500_000_000  # 1.5 % of the measure phase sent half a second late
    write_cell(tmp_path, run, behind, sent=[sent.set_column(3, "sent_ns", pa.array(late))])

    with pytest.raises(GateError) as failure:
        run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    message = str(failure.value)
    assert "raw_samples: expect_column_values_to_be_between" in message and '"min_e2e_intended_ns"' in message
    assert "expect_column_pair_values_a_to_be_greater_than_b" in message and '"producer_rows"' in message
    assert "raw_cells: expect_column_values_to_be_between" in message and '"lag_over_limit"' in message
    assert _published(tmp_path) == []
    validation = json.loads(next((tmp_path / "quarantine").rglob("validation.json")).read_text())
    assert validation["success"] is False and validation["suites"]["percentile_tables"]["success"] is True
    assert (next((tmp_path / "quarantine").rglob("percentiles.md"))).exists()
    # the gate run in this process on the tables read back from the lake says what its own process said
    again = gate(spark, tmp_path, find_run(tmp_path, run.run_id), GateThresholds())

    def checks(failed: list[str]) -> list[str]:  # suite, expectation and its kwargs (rows may come in any order)
        return sorted(f.split("): {")[0] for f in failed)

    assert not again.success and checks(again.failed) == checks(validation["failed"])


def test_a_cell_the_harness_failed_does_not_quarantine_the_others(spark: SparkSession, tmp_path: Path) -> None:
    """A cell whose generator fell behind, lost messages and was stopped half-way through its measure phase,
    failed by the harness when it landed (its reason in its row), is published as failed beside the ok cell:
    the gate judges schedule, lag and loss on the cells the harness passed."""
    run = RunInfo("one-failed-run", "2026-01-03")
    write_cell(tmp_path, run, SynthCell("fine"))
    behind = SynthCell("behind", seed=3, lost=range(1200, 1230), status="failed")
    sent = sent_table(behind, 0, False)
    late = sent["sent_ns"].to_numpy().copy()
    late[1000:1030] += 500_000_000  # the lag the harness failed the cell for
    stopped = sent.set_column(3, "sent_ns", pa.array(late)).slice(0, 2000)  # 1 000 of 2 000 measured
    write_cell(tmp_path, run, behind, received_table(behind, stopped), [stopped])

    folder = run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    text = (folder / "percentiles.md").read_text()
    assert "`fine` [ok]" in text and "`behind` [failed]" in text
    assert not (tmp_path / "quarantine").exists()


@pytest.mark.parametrize(("allowed", "published"), [(0.02, True), (0.01, False)])
def test_loss_is_judged_against_the_cells_own_allowance(
    allowed: float, published: bool, spark: SparkSession, tmp_path: Path
) -> None:
    """Core NATS may lose messages: 30 of 2000 measured (1.5 %) pass under a matrix allowance of 2 % and fail
    under 1 %, naming the loss check."""
    run = write_run(tmp_path, [SynthCell("lossy", lost=range(1200, 1230), allowed_loss_ratio=allowed)])
    if published:
        run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
        assert _published(tmp_path)
        return
    with pytest.raises(GateError, match="loss_over_allowance"):
        run_analysis(spark, tmp_path, run.run_id, extra_tables=False)
    assert _published(tmp_path) == []
