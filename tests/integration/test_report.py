"""A report of real NATS cells, opened in headless Chromium: the charts must render, not only the file exist."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.report import build_run_report, run_report_path
from tests.processes import unreaped_exit

from .helpers import make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")

EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)
# Measured on this report at 1400×3000 (2026-11-21): 5.7 % of pixels not white, ~1 600 distinct colours, ~23 000
# saturated pixels (the chart lines and dots: tables and text are grey). The same page with its <svg> elements
# removed gave 6.0 %, ~720 colours and ~2 900 saturated pixels (link underlines): ink alone does not tell
# charts from tables, colours and saturated pixels do.
MIN_INK_FRACTION = 0.03
MIN_COLOURS = 1100
MIN_SATURATED_PIXELS = 10_000


def screenshot(html: Path, png: Path, profile: Path) -> None:
    """Headless Chromium in its own session; the whole process group is killed afterwards, so its helper
    processes (zygote, GPU, renderer) never outlive the test."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: run `make tools`")
    proc = subprocess.Popen(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            "--window-size=1400,3000",
            html.as_uri(),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _exits_within(proc.pid, 120)
    finally:
        # while chromium is not reaped its PID, and so its group id, names no other process
        with contextlib.suppress(ProcessLookupError):  # the group is already gone
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _exits_within(pid: int, timeout_s: float) -> None:
    """Wait until child `pid` exits, without reaping it; subprocess.TimeoutExpired if it runs on."""
    deadline = time.monotonic() + timeout_s
    while unreaped_exit(pid) is None:
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(f"pid {pid}", timeout_s)
        time.sleep(0.05)


def test_report_of_real_cells_renders_in_chromium(tmp_path: Path, console: Console) -> None:
    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    slow, fast = make_cell("e2e", rate_per_s=800), make_cell("e2e", rate_per_s=1600)
    reports = [run_cell(cell, lake, run, console) for cell in (slow, fast)]
    assert [r.status for r in reports] == ["ok", "ok"], [r.reason for r in reports]

    path = build_run_report(lake.root, run.run_id)
    assert path == run_report_path(lake.root, run.run_date, run.run_id)
    html = path.read_text()
    assert not EXTERNAL.findall(html), EXTERNAL.findall(html)[:3]
    assert "<script" not in html and "<link" not in html  # nothing loaded from anywhere

    # Every chart of each cell is an inline SVG with its series named.
    for cell in (slow, fast):
        for kind in ("spectrum", "scatter", "histogram"):
            for basis in ("intended", "sent"):
                assert f'id="{kind}-{cell.id}-e2e-{basis}"' in html
        assert f'id="cell-{cell.id}"' in html
    assert html.count('xlink:href="data:image/png;base64,') == 2  # each cell's scatter dots, rasterized inline
    assert html.count("<svg") == 2 * 3 + 1 + 1  # 3 per cell, the overlay, the ratio of the one-field pair
    assert "response time (n=800)" in html and "service time (n=800)" in html  # 800/s × 1 s measure
    assert "response time (n=1,600)" in html
    assert "differs in workload.rate_per_s: 800.0 → 1600.0" in html
    assert f'id="ratio-{slow.id}-{fast.id}-e2e-intended"' in html
    assert "no regressions checked yet" in html
    # The exact table is the landed one: p50 of the recomputed analysis equals result.json's.
    p50_ms = reports[0].analysis.metrics["e2e"]["intended"].percentiles["50"] / 1e6
    assert f"{p50_ms:.3f}" in html

    png = tmp_path / "report.png"
    screenshot(path, png, tmp_path / "chromium-profile")
    pixels = np.asarray(Image.open(png).convert("RGB"))
    assert pixels.shape[:2] == (3000, 1400)
    ink = float((pixels.min(axis=2) < 235).mean())
    colours = len(np.unique(pixels.reshape(-1, 3), axis=0))
    rgb = pixels.astype(np.int16)
    saturated = int((rgb.max(axis=2) - rgb.min(axis=2) > 60).sum())
    print(
        f"report {path.stat().st_size / 1024:.0f} KiB; screenshot: {ink:.1%} ink, {colours} colours, "
        f"{saturated} saturated pixels"
    )
    assert ink > MIN_INK_FRACTION, f"screenshot mostly blank: {ink:.1%} of pixels drawn"
    assert colours > MIN_COLOURS, f"screenshot has only {colours} colours: charts did not render"
    assert saturated > MIN_SATURATED_PIXELS, f"only {saturated} coloured pixels: chart series did not render"


def test_compare_pairs_by_series_key_and_the_cli_refuses_unknown_runs(tmp_path: Path, console: Console) -> None:
    lake = Lake(tmp_path / "lake")
    cell = make_cell("e2e", rate_per_s=300, measure_s=1)
    runs = [RunInfo.new(), RunInfo(f"{RunInfo.new().run_id}-b", RunInfo.new().run_date)]
    for run in runs:
        report = run_cell(cell, lake, run, console)
        assert report.status == "ok", report.reason
    out = tmp_path / "cmp.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench_tasks",
            "report",
            "--lake",
            str(lake.root),
            "--out",
            str(out),
            "--compare",
            runs[0].run_id,
            runs[1].run_id,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert "1 pair(s) by series key" in html and "differs in nothing" in html
    assert 'id="compare-' in html and f'id="ratio-{cell.id}-{cell.id}-e2e-intended"' in html
    assert not EXTERNAL.findall(html)

    missing = subprocess.run(
        [sys.executable, "-m", "bench_tasks", "report", "nope", "--lake", str(lake.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    said = " ".join(missing.stderr.split())  # rich wraps at 120 columns
    assert f"error: no run 'nope' in the lake {lake.root}; newest runs: " in said
    assert runs[0].run_id in said and runs[1].run_id in said
