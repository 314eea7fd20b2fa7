"""Raw-sample retention on a local lake: which runs `sixnines lake prune` selects, that a dry run removes
nothing, that a prune removes only raw sample files and records it, and that an interrupted prune is finished."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import bench_tasks.lake.prune as prune_module
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.lake.prune import plan_prune, prune, prune_run
from bench_tasks.lake.retention import (
    STATE_PRUNED,
    STATE_PRUNING,
    RawSamplesPruned,
    marker_path,
    pruned_marker,
    refuse_if_pruned,
)

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)
SAMPLES = ("sent-p0.parquet", "sent-p1.parquet", "received-c0.parquet")
KEPT = ("cell.hlog", "result.json", "broker.log")


def land(lake: Path, run_id: str, days_old: float, analysed: bool = True, cells: int = 2) -> Path:
    """A run's lake folders as landing and the analysis leave them: raw cells, a cells table, published tables."""
    run = RunInfo(run_id=run_id, run_date="2026-11-01")
    raw = Lake(lake).run_dir(run)
    for i in range(cells):
        folder = raw / f"cell_id=c{i}"
        folder.mkdir(parents=True)
        for name in SAMPLES:
            pq.write_table(pa.table({"seq": list(range(100 + i))}), folder / name)
        for name in KEPT:
            (folder / name).write_text(name)
        finished = (NOW - dt.timedelta(days=days_old, hours=i)).isoformat()
        row = {"run_id": run_id, "run_date": run.run_date, "matrix": "quick", "cell_id": f"c{i}", "status": "ok"}
        Lake(lake).upsert_cell_row(run, {**row, "started_at": finished, "finished_at": finished})
    if analysed:
        published = lake / "published" / f"run_date={run.run_date}" / f"run_id={run_id}"
        published.mkdir(parents=True)
        (published / "percentiles.csv").write_text("p\n")
    return raw


def test_selects_only_analysed_runs_older_than_the_limit(tmp_path: Path) -> None:
    land(tmp_path, "old", days_old=40)
    land(tmp_path, "young", days_old=5)
    land(tmp_path, "unanalysed", days_old=40, analysed=False)
    staged = land(tmp_path, "landing", days_old=40)
    (tmp_path / ".staging" / "landing" / "c9").mkdir(parents=True)
    for folder in land(tmp_path, "empty", days_old=40).iterdir():
        for name in SAMPLES:
            (folder / name).unlink()
    plan = plan_prune(tmp_path, 30, NOW)
    assert [r.run_id for r in plan.runs] == ["old"]
    assert plan.kept == 1
    skipped = {s.run_id: s.reason for s in plan.skipped}
    assert skipped["unanalysed"].startswith("not analysed yet")
    assert skipped["landing"] == "a cell is being written (.staging/landing exists)"
    assert skipped["empty"] == "no raw sample files (nothing to prune)"
    run = plan.runs[0]
    assert run.cells == 2
    assert sorted(f.name for f in run.files) == sorted(SAMPLES * 2)
    assert run.bytes == sum(f.stat().st_size for f in run.files) > 0
    assert 39.9 < run.age_days(NOW) < 40.1  # the newest cell's finished_at, not file times
    assert staged.exists()


def test_age_is_the_newest_cells_recorded_finish(tmp_path: Path) -> None:
    land(tmp_path, "edge", days_old=30, cells=3)  # cells finished 30 d, 30 d 1 h, 30 d 2 h ago
    assert [r.run_id for r in plan_prune(tmp_path, 30.01, NOW).runs] == []
    assert [r.run_id for r in plan_prune(tmp_path, 29.99, NOW).runs] == ["edge"]


def test_prune_removes_only_raw_samples_and_records_it(tmp_path: Path) -> None:
    raw = land(tmp_path, "old", days_old=40)
    plan = plan_prune(tmp_path, 30, NOW)
    seen: list[int] = []
    markers = prune(tmp_path, plan, lambda run, done: seen.append(done))
    assert seen[-1] == 6
    for folder in raw.iterdir():
        assert sorted(p.name for p in folder.iterdir()) == sorted(KEPT)
    marker = pruned_marker(tmp_path, "2026-11-01", "old")
    assert marker == markers[0]
    assert (marker["state"], marker["cells"], marker["files"], marker["bytes"]) == (STATE_PRUNED, 2, 6, plan.bytes)
    assert (tmp_path / "runs" / "run_date=2026-11-01" / "run_id=old" / "cells.parquet").exists()
    again = plan_prune(tmp_path, 30, NOW)
    assert again.runs == [] and again.skipped[0].reason == f"already pruned ({marker['pruned_at']})"


class Interrupted(Exception):
    """Stands for a prune stopped mid-way (Ctrl-C, a lost worker)."""


def test_an_interrupted_prune_claims_its_samples_gone_and_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw = land(tmp_path, "old", days_old=40)
    first = plan_prune(tmp_path, 30, NOW).runs[0]

    def one_then_stop(run: prune_module.RunToPrune, progress: object) -> None:
        run.files[0].unlink()
        raise Interrupted

    with monkeypatch.context() as patched:
        patched.setattr(prune_module, "_remove", one_then_stop)
        with pytest.raises(Interrupted):
            prune_run(tmp_path, first, 30)
    marker = pruned_marker(tmp_path, "2026-11-01", "old")
    assert marker is not None and marker["state"] == STATE_PRUNING  # written before any file went
    with pytest.raises(RawSamplesPruned, match=r"run old: its raw samples were pruned \(.+\), so analysing"):
        refuse_if_pruned(tmp_path, "2026-11-01", "old", "analysing it again")
    left = [f for f in first.files if f.exists()]
    assert len(left) == len(first.files) - 1
    resumed = plan_prune(tmp_path, 9999, NOW).runs  # the marker decided: the age limit no longer matters
    assert [(r.run_id, r.resumed, len(r.files)) for r in resumed] == [("old", True, len(left))]
    final = prune_run(tmp_path, resumed[0], 9999)
    assert (final["state"], final["files"], final["bytes"]) == (STATE_PRUNED, len(first.files), first.bytes)
    assert final["started_at"] == marker["started_at"] and final["older_than_days"] == 30
    assert not any(f.exists() for f in first.files)
    assert all((folder / "cell.hlog").exists() for folder in raw.iterdir())


def sixnines(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("SIXNINES_LAKE", "SIXNINES_RAW_RETENTION_DAYS")}
    return subprocess.run([sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, env=env)


def test_cli_dry_run_lists_and_removes_nothing_then_prunes(tmp_path: Path) -> None:
    raw = land(tmp_path, "old", days_old=400)
    land(tmp_path, "unanalysed", days_old=400, analysed=False)
    before = sorted(p for p in raw.rglob("*") if p.is_file())
    dry = sixnines("lake", "prune", "--older-than-days", "30", "--lake", str(tmp_path), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would prune run old (2026-11-01" in dry.stdout and "2 cells, 6 files" in dry.stdout
    assert "skipped run unanalysed (2026-11-01): not analysed yet" in dry.stdout
    assert "(dry run: nothing removed)" in dry.stdout
    assert sorted(p for p in raw.rglob("*") if p.is_file()) == before
    assert not marker_path(tmp_path, "2026-11-01", "old").exists()
    done = sixnines("lake", "prune", "--older-than-days", "30", "--lake", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["dry_run"], report["files"], [m["state"] for m in report["pruned"]]) == (False, 6, [STATE_PRUNED])
    assert sorted(p.name for p in raw.rglob("*") if p.is_file()) == sorted(KEPT * 2)
    listed = sixnines("runs", "--lake", str(tmp_path))
    assert f"(raw samples pruned {report['pruned'][0]['pruned_at']})" in " ".join(listed.stdout.split())
    by_id = {
        r["run_id"]: r["raw_pruned"] for r in json.loads(sixnines("runs", "--json", "--lake", str(tmp_path)).stdout)
    }
    assert by_id == {"old": report["pruned"][0]["pruned_at"], "unanalysed": None}


def test_cli_needs_a_limit(tmp_path: Path) -> None:
    missing = sixnines("lake", "prune", "--lake", str(tmp_path))
    assert missing.returncode == 2 and "--older-than-days" in missing.stderr


def test_a_pruned_cells_spectrum_goes_through_its_landed_percentiles() -> None:
    """What the report draws once the samples are gone: the same exact points the full spectrum marks."""
    from bench_tasks.core.percentiles import LatencySummary, summarize
    from bench_tasks.report.spectrum import landed_spectrum, spectrum

    values = np.random.default_rng(7).lognormal(13, 1, 25_000).astype(np.int64)
    landed_summary = LatencySummary.from_dict(json.loads(json.dumps(summarize(values).to_dict())))
    full, landed = spectrum(values), landed_spectrum(landed_summary)
    assert landed.marks == full.marks and len(landed.marks) == 5  # p50 … p99.99 supported by 25,000 samples
    assert (landed.count, landed.max_ns) == (full.count, full.max_ns)
    assert (landed.x[0], landed.latency_ns[0]) == (1.0, values.min())
    assert (landed.x[-1], landed.latency_ns[-1]) == (25_000, values.max())
    assert list(landed.x) == sorted(landed.x)
    assert landed_spectrum(summarize(np.array([], dtype=np.int64))).count == 0


def test_a_pruned_repeated_cell_is_left_out_of_the_systems_view_saying_why() -> None:
    """Repeats are merged from their samples, never averaged: once pruned, the cell names why it has no ratio."""
    from bench_tasks.core.analysis import Accounting, CellAnalysis
    from bench_tasks.core.percentiles import summarize
    from bench_tasks.report.data import CellData
    from bench_tasks.report.pairing import CellKey
    from bench_tasks.report.side_by_side import Group
    from bench_tasks.report.systems_view import left_out, usable

    counts = Accounting(10, 10, 0, 10, 10, 0, 0, 0)
    analysis = CellAnalysis(
        counts, counts, {"e2e": {"intended": summarize(np.arange(10))}}, summarize(np.arange(10)), 1, 1
    )

    def repeat(k: int, pruned: str | None) -> CellData:
        key = CellKey("r1", "c1", "s1", "nats core", {"system": "nats"}, repeat=k, repeats=2)
        return CellData(key, Path("."), {"status": "ok"}, analysis, samples_pruned=pruned)

    assert len(usable([repeat(1, None), repeat(2, None)])) == 2
    pruned = [repeat(1, "2026-12-01T00:00:00+00:00"), repeat(2, "2026-12-01T00:00:00+00:00")]
    assert usable(pruned) == [] and len(usable(pruned[:1])) == 1  # one alone keeps its landed numbers
    note = left_out(pruned, Group(None, ("c1",), ("nats",)))  # type: ignore[arg-type]
    assert "its repeats cannot be merged exactly: raw samples pruned (2026-12-01T00:00:00+00:00)" in note
