"""The cell pass (spark_jobs.cellpass: one Python task per cell) against the Spark SQL passes (spark_jobs.analysis)
on one lake: every frame of the Analysis the tables are built from must be the same, row for row. The cells
reach every rule both implement: messages received twice, across two consumers and with the later copy first
in its file; acknowledgements (publish and rtt); leaders; repeats; a service chain with hops (one relay send time
missing); send errors, a row without a seq and one without its phase; a producer whose messages all got lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession

from bench_tasks import RECEIVED_SCHEMA, Lake, RunInfo
from bench_tasks.lake.records import write_parquet
from spark_jobs import lakeio
from spark_jobs.analysis import Analysis, analyze
from spark_jobs.cellpass.route import analyze_cells, readable
from tests.spark.synth import SynthCell, cell_row, received_table, sent_table, write_cell

RUN = RunInfo("cellpass-run", "2026-01-05")


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(name), name, values)


def _masked(column: pa.ChunkedArray, rows: list[int]) -> pa.Array:
    values = column.to_pylist()
    for row in rows:
        values[row] = None
    return pa.array(values, column.type)


def _land_core(lake: Path) -> None:
    """Core NATS, two consumers each receiving half; 40 measure-phase messages arrive twice more (1 µs before
    the original in the other consumer's file, and 3 ms after it, written first); one send error, one row without
    a seq, one without its phase."""
    cell = SynthCell("core", rate_per_s=4000, measure_s=2.0, seed=1, lost=[5, 900], allowed_loss_ratio=0.01)
    sent = sent_table(cell, 0, False)
    sent = _set(sent, "sent_ns", _masked(sent["sent_ns"], [100]))
    sent = _set(sent, "seq", _masked(sent["seq"], [200]))
    sent = _set(sent, "phase", _masked(sent["phase"], [300]))
    received = received_table(cell, sent.filter(pc.and_(pc.is_valid(sent["sent_ns"]), pc.is_valid(sent["seq"]))))
    halves = [received.filter(pc.equal(pc.bit_wise_and(received["seq"], 1), parity)) for parity in (0, 1)]
    twice = received.take(pa.array(np.arange(6000, 6040)))
    earlier = _set(twice, "received_ns", pc.subtract(twice["received_ns"], pa.scalar(1_000, pa.int64())))
    later = _set(twice, "received_ns", pc.add(twice["received_ns"], pa.scalar(3_000_000, pa.int64())))
    write_cell(lake, RUN, cell, received=pa.concat_tables(halves), sent=[sent])
    folder = Lake(lake).cell_dir(RUN, cell.cell_id, None)
    write_parquet(pa.concat_tables([later, halves[0]]), folder / "received-c0.parquet")
    write_parquet(pa.concat_tables([halves[1], earlier]), folder / "received-c1.parquet")


def _land_chain(lake: Path) -> None:
    """A two-hop chain: the final consumer's receipts carry the relay's times (one relay send time unknown)."""
    cell = SynthCell("chain", measurement="chain", rate_per_s=2000, measure_s=2.0, seed=6)
    sent = sent_table(cell, 0, False)
    final = received_table(cell, sent)
    intended = final["intended_ns"].to_numpy()
    relay_received = intended + 150_000 + (final["seq"].to_numpy() % 7) * 10_000
    relay_sent = pa.array(relay_received + 20_000)
    final = _set(final, "relay_received_ns", pa.array(relay_received))
    final = _set(final, "relay_sent_ns", _masked(pa.chunked_array([relay_sent]), [10]))
    final = _set(final, "hop", pa.array(np.full(final.num_rows, 2, np.int8)))
    write_cell(lake, RUN, cell, sent=[sent])
    folder = Lake(lake).cell_dir(RUN, cell.cell_id, None)
    write_parquet(final.cast(RECEIVED_SCHEMA), folder / "received-c0.parquet")
    Lake(lake).upsert_cell_row(RUN, cell_row(cell, RUN, sent, final))


def land_cells(lake: Path) -> None:
    """The cells every test here analyses (see the module docstring), landed in the local lake `lake`."""
    _land_core(lake)
    _land_chain(lake)
    kafka = SynthCell("kafka", system="kafka", acks="all", rate_per_s=3000, measure_s=2.0, producers=2, seed=2)
    sent = [sent_table(kafka, p, True) for p in range(2)]
    received = received_table(kafka, sent[0])  # producer 1's messages all lost
    leaders = pa.array((received["seq"].to_numpy() % 3 + 1).astype(np.int32))
    write_cell(lake, RUN, kafka, received=_set(received, "leader", leaders), sent=sent)
    write_cell(lake, RUN, SynthCell("js", mode="jetstream", rate_per_s=3000, seed=3))
    write_cell(lake, RUN, SynthCell("rtt", measurement="rtt", rate_per_s=2000, seed=4))
    for r in (1, 2):
        write_cell(lake, RUN, SynthCell("rep", rate_per_s=2000, seed=10 + r, repeat=r, repeats=2, lag_ns=30_000 * r))


@pytest.fixture(scope="module")
def landed(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> lakeio.Raw:
    lake = tmp_path_factory.mktemp("cellpass-lake")
    land_cells(lake)
    raw = lakeio.read_raw(spark, lake, [RUN.run_id])
    assert readable(raw)
    return raw


@pytest.fixture(scope="module")
def both(spark: SparkSession, landed: lakeio.Raw) -> tuple[Analysis, Analysis]:
    return analyze_cells(spark, landed), analyze(landed.sent, landed.received, landed.cells)


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


FRAMES = {  # Analysis frame -> its keys
    "summary": ["level", "g", "metric", "basis", "leader", "sec"],
    "measured": ["unit", "metric", "basis", "leader", "bucket"],
    "done": ["unit", "metric", "basis", "sec"],
}


def _frame(result: Analysis, name: str) -> pd.DataFrame:
    return getattr(result, name)


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_every_frame_of_the_analysis_equals_the_spark_passes(both: tuple[Analysis, Analysis], name: str) -> None:
    cells, spark_sql = (_sorted(_frame(r, name), FRAMES[name]) for r in both)
    assert list(cells.columns) == list(spark_sql.columns)
    assert cells.dtypes.to_dict() == spark_sql.dtypes.to_dict()  # the tables see the same types from either route
    assert len(cells) == len(spark_sql) > 0
    for column in cells.columns:
        if column in ("vsq", "mean_ns", "stddev_ns"):  # float sums in another order
            np.testing.assert_allclose(cells[column].astype(float), spark_sql[column].astype(float), rtol=1e-9)
        else:
            assert cells[column].astype(str).tolist() == spark_sql[column].astype(str).tolist(), column


def test_the_ledger_equals_the_spark_pass(both: tuple[Analysis, Analysis]) -> None:
    cells, spark_sql = both
    for name, keys in (("producers", ["unit", "producer_id"]), ("accounting", ["unit"])):
        mine, theirs = (_sorted(getattr(r.ledger, name), keys) for r in (cells, spark_sql))
        assert mine.astype(str).to_dict("records") == theirs.astype(str).to_dict("records"), name
    accounting = _sorted(cells.ledger.accounting, ["unit"]).set_index("cell_id")
    assert accounting.loc["core", "duplicated"] == 80  # 40 messages, each received three times
    assert accounting.loc["kafka", "lost"] > 0


def same_frames(mine: pd.DataFrame, theirs: pd.DataFrame, keys: list[str]) -> None:
    mine, theirs = _sorted(mine, keys), _sorted(theirs, keys)
    assert list(mine.columns) == list(theirs.columns) and len(mine) == len(theirs)
    for column in mine.columns:
        if column in ("vsq", "mean_ns", "stddev_ns"):  # float sums in another order
            np.testing.assert_allclose(mine[column].astype(float), theirs[column].astype(float), rtol=1e-9)
        else:
            assert mine[column].astype(str).tolist() == theirs[column].astype(str).tolist(), column


@pytest.mark.parametrize("batch_rows", [97])
def test_tiny_batches_give_the_same_frames(
    spark: SparkSession, landed: lakeio.Raw, both: tuple[Analysis, Analysis], batch_rows: int
) -> None:
    """The tasks stream their files in batches: at 97 rows each (a file's rows in 60–170 of them), the core
    cell's duplicates (the copies in the other consumer's file, the later copy first in its own) lie in other
    batches than the receipts they pair with, its rows without a sent time, a seq or a phase each in a batch of
    its own, the chain's missing relay send time in one of many; every frame and the ledger are the same as in
    one batch per file."""
    streamed = analyze_cells(spark, landed, batch_rows=batch_rows)
    for name, keys in FRAMES.items():
        same_frames(_frame(streamed, name), _frame(both[0], name), keys)
    same_frames(streamed.ledger.accounting, both[0].ledger.accounting, ["unit"])
    same_frames(streamed.ledger.producers.astype(str), both[0].ledger.producers.astype(str), ["unit", "producer_id"])
    assert _sorted(streamed.ledger.accounting, ["unit"]).set_index("cell_id").loc["core", "duplicated"] == 80


def test_the_summary_holds_every_level_and_metric(both: tuple[Analysis, Analysis]) -> None:
    """The parity above is only as strong as what the lake reaches: hops, rtt, leaders and repeats are in it."""
    summary = _sorted(both[0].summary, FRAMES["summary"])
    assert set(summary["level"]) == {0, 1, 2, 3}
    assert {0, 1, 2, 3, 4, 5} <= set(summary["metric"])  # e2e, publish, rtt, hop1, hop2, lag


def test_a_run_without_raw_files_gives_the_same_empty_analysis(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A run whose cells left no raw Parquet (each failed before sending): no task runs, and both routes give no
    statistics and an accounting row of zeros per cell."""
    lake = tmp_path_factory.mktemp("cellpass-empty")
    run = RunInfo("cellpass-empty", "2026-01-05")
    for name in ("a", "b"):
        write_cell(lake, run, SynthCell(name, rate_per_s=1000, seed=7))
    for parquet in (lake / "raw").rglob("*.parquet"):
        parquet.unlink()
    raw = lakeio.read_raw(spark, lake, [run.run_id])
    assert not raw.sent_files and not raw.received_files
    cells, spark_sql = analyze_cells(spark, raw), analyze(raw.sent, raw.received, raw.cells)
    for name in FRAMES:
        assert len(_frame(cells, name)) == len(_frame(spark_sql, name)) == 0, name
    mine, theirs = (_sorted(r.ledger.accounting, ["unit"]) for r in (cells, spark_sql))
    assert mine.astype(str).to_dict("records") == theirs.astype(str).to_dict("records")
    assert len(mine) == 2 and (mine["scheduled"] == 0).all()
