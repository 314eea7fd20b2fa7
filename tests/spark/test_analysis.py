"""Every table of a run against numpy on the same raw rows: all percentiles of every cell, metric, basis, leader
and repeat (numpy's `inverted_cdf`, i.e. bench_tasks.summarize), the timeline's per-second counts, p50, p99 and
max, the histogram's counts and the accounting — through the whole pipeline (spark_jobs.pipeline), so the
two-pass percentiles, the duplicate routing, the known-value shortcut and the tables' assembly are all on the
path. The cells are built to reach each of those: a lossy core cell with messages received twice, JetStream
with publish acks, a Kafka cell whose receipts carry partition leaders, a repeated cell, and a cell whose
latencies take a handful of values (whole buckets of ties)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from bench_tasks import PERCENTILES, RunInfo, summarize
from spark_jobs.exact import percentile_column
from spark_jobs.lakeio import RunRef, table_dir
from spark_jobs.pipeline import run_analysis
from tests.spark.synth import T0, SynthCell, received_rows, received_table, sent_table, write_cell

NS = 1_000_000_000
RUN = RunInfo("analysis-run", "2026-01-04")


@dataclass
class Landed:
    """One landed unit (a cell, or one repeat of it) and its rows, to compute the expected tables from."""

    cell: SynthCell
    sent: pa.Table
    received: pa.Table


def _duplicated(received: pa.Table, rows: int, seed: int) -> pa.Table:
    """`rows` receipts delivered again 2 ms later: they must count once, at their first receipt."""
    picked = np.sort(np.random.default_rng(seed).choice(received.num_rows, rows, replace=False))
    again = received.take(pa.array(picked))
    later = pc.add(again["received_ns"], pa.scalar(2_000_000, pa.int64()))
    return pa.concat_tables(
        [received, again.set_column(again.schema.get_field_index("received_ns"), "received_ns", later)]
    )


def _with_leaders(cell: SynthCell, received: pa.Table) -> pa.Table:
    seq = received["seq"].to_numpy()
    columns = [received[c].to_numpy() for c in ("producer_id", "seq", "intended_ns", "sent_ns", "received_ns")]
    return received_rows(cell, *columns, leader=(seq % 3 + 1).astype(np.int32))


def _ties(cell: SynthCell, received: pa.Table) -> pa.Table:
    """Latencies of five values only: every located bucket holds one value many times."""
    intended = received["intended_ns"].to_numpy()
    latency = np.array([200_000, 250_000, 300_000, 900_000, 5_000_000])[received["seq"].to_numpy() % 5]
    columns = [received[c].to_numpy() for c in ("producer_id", "seq", "intended_ns", "sent_ns")]
    return received_rows(cell, *columns, intended + latency)


def _land(lake: Path) -> list[Landed]:
    core = SynthCell(
        "core",
        rate_per_s=20_000,
        warmup_s=0.5,
        measure_s=6.0,
        cooldown_s=0.5,
        seed=1,
        lost=[7, 40_000, 70_000],
        allowed_loss_ratio=0.001,
    )
    kafka = SynthCell("kafka", system="kafka", acks="all", rate_per_s=4000, measure_s=3.0, producers=2, seed=2)
    units = [
        (core, lambda c, s: _duplicated(received_table(c, s), 30, 5)),
        (SynthCell("js", mode="jetstream", rate_per_s=5000, measure_s=3.0, seed=3), received_table),
        (kafka, lambda c, s: _with_leaders(c, received_table(c, s))),
        (SynthCell("ties", rate_per_s=3000, seed=4), lambda c, s: _ties(c, received_table(c, s))),
        *[
            (SynthCell("rep", rate_per_s=3000, seed=10 + r, repeat=r, repeats=2, lag_ns=30_000 * r), received_table)
            for r in (1, 2)
        ],
    ]
    landed = []
    for cell, receive in units:
        sent = pa.concat_tables(
            [sent_table(cell, p, cell.mode == "jetstream" or cell.system == "kafka") for p in range(cell.producers)]
        )
        received = receive(cell, sent)
        write_cell(lake, RUN, cell, received=received, sent=[sent])
        landed.append(Landed(cell, sent, received))
    return landed


def _first_receipts(received: pa.Table) -> dict[str, np.ndarray]:
    """Each message once, at its earliest receipt (the numpy twin of samples.first_receipts)."""
    cols = {
        c: received[c].to_numpy(zero_copy_only=False)
        for c in ("producer_id", "seq", "intended_ns", "sent_ns", "received_ns", "leader")
    }
    order = np.lexsort((cols["received_ns"], cols["seq"], cols["producer_id"]))
    key = np.stack([cols["producer_id"][order], cols["seq"][order]])
    first = order[np.concatenate([[True], np.any(key[:, 1:] != key[:, :-1], axis=0)])]
    return {c: v[first] for c, v in cols.items()}


def _measured(cell: SynthCell, intended: np.ndarray) -> np.ndarray:
    return (intended >= cell.measure_start_ns) & (intended < cell.measure_end_ns)


def _samples(unit: Landed) -> Iterator[tuple[str, str, object, np.ndarray, np.ndarray, np.ndarray]]:
    """(metric, basis, leader, intended, done, latency) of every sample of a unit, every phase."""
    got = _first_receipts(unit.received)
    for basis, start in (("intended", got["intended_ns"]), ("sent", got["sent_ns"])):
        yield "e2e", basis, None, got["intended_ns"], got["received_ns"], got["received_ns"] - start
        if unit.cell.system == "kafka":
            for leader in np.unique(got["leader"]):
                mine = got["leader"] == leader
                yield "e2e", basis, int(leader), got["intended_ns"][mine], None, (got["received_ns"] - start)[mine]
    acked = unit.sent.filter(pc.is_valid(unit.sent["acked_ns"]))
    if acked.num_rows:
        cols = {c: acked[c].to_numpy() for c in ("intended_ns", "sent_ns", "acked_ns")}
        for basis in ("intended", "sent"):
            yield "publish", basis, None, cols["intended_ns"], cols["acked_ns"], cols["acked_ns"] - cols[f"{basis}_ns"]


def _stats(values: np.ndarray) -> dict[str, object]:
    summary = summarize(values)
    return {
        "count": summary.count,
        "min_ns": summary.min_ns,
        "max_ns": summary.max_ns,
        **{percentile_column(p): summary.percentiles[p] for p in PERCENTILES},
        "unsupported": [p for p in PERCENTILES if summary.percentiles[p] is None],
    }


def _table(lake: Path, name: str) -> list[dict]:
    return pq.read_table(table_dir(lake, name, RunRef(RUN.run_id, RUN.run_date))).to_pylist()


@pytest.fixture(scope="module")
def analyzed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Landed]]:
    lake = tmp_path_factory.mktemp("analysis") / "lake"
    landed = _land(lake)
    run_analysis(spark, lake, RUN.run_id)
    return lake, landed


def _expected_percentiles(landed: list[Landed]) -> dict[tuple, dict[str, object]]:
    merged: dict[tuple, list[np.ndarray]] = {}
    for unit in landed:
        for metric, basis, leader, intended, _, values in _samples(unit):
            merged.setdefault((unit.cell.cell_id, metric, basis, leader), []).append(
                values[_measured(unit.cell, intended)]
            )
    return {key: _stats(np.concatenate(parts)) for key, parts in merged.items()}


def test_every_percentile_of_every_cell_equals_numpy(analyzed: tuple[Path, list[Landed]]) -> None:
    lake, landed = analyzed
    rows = {(r["cell_id"], r["metric"], r["basis"], r["leader"]): r for r in _table(lake, "percentiles")}
    want = _expected_percentiles(landed)
    assert set(rows) == set(want)
    compared = 0
    for key, expected in want.items():
        got = rows[key]
        assert {k: got[k] for k in expected} == expected, key
        compared += sum(v is not None for k, v in expected.items() if k.startswith("p"))
    assert rows[("core", "e2e", "intended", None)]["count"] >= 100_000  # p99.999 supported and compared
    assert compared > 80


def test_moments_and_repeats_equal_numpy(analyzed: tuple[Path, list[Landed]]) -> None:
    lake, landed = analyzed
    by_repeat = {(r["cell_id"], r["repeat"], r["metric"], r["basis"]): r for r in _table(lake, "percentiles_by_repeat")}
    for unit in landed:
        for metric, basis, leader, intended, _, values in _samples(unit):
            if leader is not None:
                continue
            measured = values[_measured(unit.cell, intended)]
            got = by_repeat[(unit.cell.cell_id, unit.cell.repeat, metric, basis)]
            assert {k: got[k] for k in _stats(measured)} == _stats(measured)
            assert got["mean_ns"] == pytest.approx(float(np.mean(measured)), rel=1e-12)
            assert got["stddev_ns"] == pytest.approx(float(np.std(measured)), rel=1e-9)


def test_timeline_equals_numpy_per_second(analyzed: tuple[Path, list[Landed]]) -> None:
    lake, landed = analyzed
    rows = {(r["cell_id"], r["repeat"], r["metric"], r["basis"], r["second"]): r for r in _table(lake, "timeline")}
    checked = 0
    for unit in landed:
        sends = np.bincount((unit.sent["sent_ns"].to_numpy() - T0) // NS)
        for metric, basis, leader, intended, done, values in _samples(unit):
            if leader is not None:
                continue
            second = (intended - T0) // NS
            completed = np.bincount((done - T0) // NS)
            for s in np.unique(second):
                got = rows[(unit.cell.cell_id, unit.cell.repeat, metric, basis, int(s))]
                mine = np.sort(values[second == s])
                summary = summarize(mine)
                assert (got["count"], got["max_ns"]) == (mine.size, int(mine[-1]))
                assert (got["p50_ns"], got["p99_ns"]) == (summary.percentiles["50"], summary.percentiles["99"])
                assert got["completed_per_s"] == (completed[s] if s < completed.size else 0)
                assert got["sent_per_s"] == (sends[s] if s < sends.size else 0)
                checked += 1
    assert checked > 50


def test_histogram_and_accounting_equal_numpy(analyzed: tuple[Path, list[Landed]]) -> None:
    lake, landed = analyzed
    hist = {(r["cell_id"], r["metric"], r["basis"], r["bucket"]): r["count"] for r in _table(lake, "histogram")}
    want: dict[tuple, int] = {}
    for unit in landed:
        for metric, basis, leader, intended, _, values in _samples(unit):
            if leader is not None:
                continue
            measured = values[_measured(unit.cell, intended)]
            with np.errstate(divide="ignore"):
                buckets = np.where(measured < 1, -1, np.floor(np.log2(measured.astype(np.float64)) * 16)).astype(int)
            for bucket, count in zip(*np.unique(buckets, return_counts=True), strict=True):
                key = (unit.cell.cell_id, metric, basis, int(bucket))
                want[key] = want.get(key, 0) + int(count)
    assert hist == want
    accounting = {r["cell_id"]: r for r in _table(lake, "accounting")}
    core = next(u for u in landed if u.cell.cell_id == "core")
    again = core.received.slice(core.received.num_rows - 30)  # the receipts _duplicated appended
    duplicated = int(_measured(core.cell, again["intended_ns"].to_numpy()).sum())
    assert (accounting["core"]["lost"], accounting["core"]["duplicated"]) == (2, duplicated)  # seq 7 was in warmup
    assert accounting["rep"]["repeats"] == 2
    assert accounting["kafka"]["acknowledged"] == accounting["kafka"]["scheduled"]
