"""The steps `bench/spark_percentiles.py` adds up as "all tables" cover the whole of the work between them: the
tables' plans are built inside the "write tables" step (seconds of py4j calls on a cold JVM that once fell between
the steps, in no timing). Spark itself is not needed to check where the clock runs: the analysis and the tables'
builders are stand-ins that take a known time."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from spark_jobs import pipeline

BUILD_S = 0.2


def _slow(result: Any) -> Any:
    def build(*_: Any) -> Any:
        time.sleep(BUILD_S)
        return result

    return build


def test_building_the_tables_counts_in_the_write_tables_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline, "analyze_raw", lambda *_: "analysis")
    monkeypatch.setattr(pipeline.percentiles, "tables", _slow({"percentiles": "p"}))
    monkeypatch.setattr(pipeline.faults, "faults_table", _slow("f"))  # each named in its own step
    monkeypatch.setattr(pipeline.capacity, "capacity_tables", _slow({"capacity": "c"}))
    monkeypatch.setattr(pipeline.timeline, "timeline_table", _slow("t"))
    monkeypatch.setattr(pipeline.histogram, "histogram_table", _slow("h"))
    written: dict[str, Any] = {}
    monkeypatch.setattr(pipeline, "_written", lambda _lake, _runs, built: written.update(built) or dict(built))
    timings: dict[str, float] = {}
    raw = SimpleNamespace(sent=None, received=None, cells=SimpleNamespace(toArrow=lambda: None), runs=[])
    result, tables = pipeline.write_all(None, "lake", raw, timings=timings)  # type: ignore[arg-type]
    assert result == "analysis" and set(tables) == {"percentiles", "faults", "capacity", "timeline", "histogram"}
    assert timings["passes"] < BUILD_S <= 5 * BUILD_S <= timings["write tables"], timings
    steps = ("percentile tables", "faults", "capacity", "timeline", "histogram")
    assert all(timings[step] >= BUILD_S for step in steps), timings
