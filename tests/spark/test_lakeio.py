"""The raw read: every file of a run in one scan per side, each row told its cell, repeat and unit by its file's
size (lakeio._read_raw) — also when two files share a size, which must not mix their rows."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bench_tasks import RunInfo
from spark_jobs.lakeio import RunRef, distinct_sizes, raw_files, read_raw
from tests.spark.synth import SynthCell, write_cell

RUN = RunInfo("lakeio-run", "2026-01-05")


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cells `a` and `b` with the same seed (byte-identical raw files: the same size), `c` repeated twice."""
    root = tmp_path_factory.mktemp("lakeio") / "lake"
    cells = [
        SynthCell("a", rate_per_s=200, measure_s=2.0, seed=7),
        SynthCell("b", rate_per_s=200, measure_s=2.0, seed=7),
        *[SynthCell("c", rate_per_s=300, measure_s=2.0, seed=8 + r, repeat=r, repeats=2) for r in (1, 2)],
    ]
    for cell in cells:
        write_cell(root, RUN, cell)
    return root


def test_files_sharing_a_size_are_read_by_separate_scans(lake: Path) -> None:
    files = raw_files(lake, [RunRef(RUN.run_id, RUN.run_date)], "sent-p*.parquet")
    sizes = {(f.cell_id, f.repeat): f.size for f in files}
    assert sizes[("a", 1)] == sizes[("b", 1)]
    groups = distinct_sizes(files)
    assert len(groups) == 2
    assert all(len({f.size for f in group}) == len(group) for group in groups)


def test_every_row_gets_its_own_cell_repeat_and_unit(spark: SparkSession, lake: Path) -> None:
    raw = read_raw(spark, lake, [RUN.run_id])
    units = {(r["cell_id"], r["repeat"]): r["unit"] for r in raw.cells.collect()}
    for frame, pattern in ((raw.sent, "sent-p*.parquet"), (raw.received, "received-c*.parquet")):
        counts = {
            (r["cell_id"], r["repeat"], r["unit"]): r["count"]
            for r in frame.groupBy("cell_id", "repeat", "unit").count().collect()
        }
        expected = {}
        for f in raw_files(lake, [RunRef(RUN.run_id, RUN.run_date)], pattern):
            rows = spark.read.parquet(f.uri).count()
            key = (f.cell_id, f.repeat, units[(f.cell_id, f.repeat)])
            expected[key] = expected.get(key, 0) + rows
        assert counts == expected
        assert len(counts) == 4
