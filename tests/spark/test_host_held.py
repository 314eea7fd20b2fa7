"""A local analysis keeps cells off its host (spark_jobs.pipeline.host_held over bench_tasks' host lease)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from bench_tasks.cell.hostlease import HostBusy, acquire_host
from bench_tasks.cell.work import CellWork
from spark_jobs.pipeline import host_held


def test_a_local_analysis_holds_the_host_against_cells(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SIXNINES_HOST_LEASE", raising=False)
    monkeypatch.delenv("SIXNINES_ANALYSIS_HOLDS_HOST", raising=False)  # the default, not the suite workers' setting
    lease = tmp_path / "cache" / "host.lease"
    with host_held(spark, "run-a"):
        held = json.loads(lease.read_text())
        with pytest.raises(HostBusy, match="analysis of run run-a"):
            acquire_host(CellWork(tmp_path / "cell"))
    assert [a["run"] for a in held["analyses"]] == ["run-a"] and not lease.exists()
