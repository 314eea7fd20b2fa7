"""Spark over a real NATS run: the percentile job reproduces the generator's own analysis exactly."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import Row, SparkSession
from rich.console import Console

from bench_tasks import PERCENTILES, Lake, RunInfo, run_cell
from spark_jobs import lakeio
from spark_jobs.exact import percentile_column
from spark_jobs.percentiles import compute
from tests.integration.helpers import make_cell

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_orphans")]


def _rows(table: pa.Table) -> list[Row]:
    """A table's rows with attribute access, as the tests read them."""
    return [Row(**row) for row in table.to_pylist()]


@pytest.mark.parametrize(
    ("measurement", "mode", "metrics"),
    [("e2e", "jetstream", {"e2e", "publish"}), ("chain", "core", {"e2e", "hop1", "hop2"})],
    ids=["jetstream-e2e", "core-chain"],
)
def test_spark_agrees_with_bench_tasks_analysis(
    measurement: str, mode: str, metrics: set[str], spark: SparkSession, tmp_path: Path, console: Console
) -> None:
    """A JetStream e2e cell (two producers, e2e and publish metrics) and a two-hop service chain (e2e, hop1,
    hop2): counts, min, max and every percentile identical; mean and stddev equal to float precision."""
    cell = make_cell(measurement, broker={"mode": mode}, rate_per_s=1000, producers=2, measure_s=1)
    run = RunInfo.new()
    report = run_cell(cell, Lake(tmp_path), run, console)
    assert report.status == "ok", report.reason
    raw = lakeio.read_raw(spark, tmp_path, [run.run_id])
    acc, pct = compute(raw.sent, raw.received, raw.cells)

    want_acc = report.analysis.accounting.to_dict()
    want_acc.pop("relayed")  # the relays' own receipts are the generator's, not a Spark table column
    got_acc = _rows(acc)[0].asDict()
    assert {k: got_acc[k] for k in want_acc} == want_acc
    assert want_acc["scheduled"] == 1000 and want_acc["received"] > 0

    rows = {(r.metric, r.basis): r.asDict() for r in _rows(pct) if r.leader is None}
    assert set(rows) == {(m, b) for m in metrics for b in ("intended", "sent")}
    assert set(report.analysis.metrics) == metrics
    for metric, by_basis in report.analysis.metrics.items():
        for basis, want in by_basis.items():
            got = rows[(metric, basis)]
            assert (got["count"], got["min_ns"], got["max_ns"]) == (want.count, want.min_ns, want.max_ns)
            assert {p: got[percentile_column(p)] for p in PERCENTILES} == want.percentiles, (metric, basis)
            assert got["mean_ns"] == pytest.approx(want.mean_ns, rel=1e-12)
            assert got["stddev_ns"] == pytest.approx(want.stddev_ns, rel=1e-9)
