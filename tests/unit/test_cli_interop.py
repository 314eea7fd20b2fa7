"""bench_tasks.cli_interop: which run `--latest` means, and how a run is addressed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench_tasks.cli_interop import _run, latest_run
from bench_tasks.errors import InteropError


def _run_folder(lake: Path, date: str, run_id: str, started: str | None) -> None:
    (lake / "raw" / f"run_date={date}" / f"run_id={run_id}").mkdir(parents=True)
    if started is not None:
        runs = lake / "runs" / f"run_date={date}" / f"run_id={run_id}"
        runs.mkdir(parents=True)
        pq.write_table(pa.table({"started_at": [started, "2099-01-01T00:00:00+00:00"]}), runs / "cells.parquet")


def test_latest_is_the_newest_date_then_the_last_started(tmp_path: Path) -> None:
    _run_folder(tmp_path, "2026-11-22", "zzz-old-day", "2026-11-22T23:59:00+00:00")
    _run_folder(tmp_path, "2026-11-23", "sixnines_quick__manual_b", "2026-11-23T09:00:00+00:00")
    _run_folder(tmp_path, "2026-11-23", "20261123T100000Z-aaaaaa", "2026-11-23T10:00:00+00:00")
    _run_folder(tmp_path, "2026-11-23", "sixnines_quick__manual_a", "2026-11-23T08:00:00+00:00")
    assert latest_run(str(tmp_path)) == "20261123T100000Z-aaaaaa"  # its first cell started last


def test_an_empty_lake_has_no_latest_run(tmp_path: Path) -> None:
    with pytest.raises(InteropError, match="no runs under") as caught:
        latest_run(str(tmp_path))
    assert caught.value.exit_code == 2


def test_a_run_is_named_or_latest_not_both(tmp_path: Path) -> None:
    assert _run("r1", False, str(tmp_path)) == "r1"
    with pytest.raises(InteropError, match="not both"):
        _run("r1", True, str(tmp_path))
    with pytest.raises(InteropError, match="give a run id, or --latest"):
        _run(None, False, str(tmp_path))
