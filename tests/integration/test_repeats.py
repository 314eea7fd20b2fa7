"""A matrix with `repeats:` against a real nats-server: every repeat lands on its own (raw folder, cells row,
topic), the report shows each repeat and the run-to-run variation, and ratios pair repeat with repeat."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_matrix
from bench_tasks.lake.layout import Lake
from bench_tasks.report import build_run_report
from bench_tasks.spec.matrix import parse_matrix

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("no_orphans")]

MATRIX = {
    "name": "itest_repeats",
    "systems": [{"system": "nats", "versions": ["latest"], "broker": {"mode": "core"}}],
    "workload": {
        "message_size_bytes": 256,
        "rate_per_s": 300,
        "warmup_s": 0.5,
        "measure_s": 1,
        "cooldown_s": 0.5,
        "drain_timeout_s": 3,
    },
    "measurements": ["e2e"],
    "axes": {"workload.rate_per_s": [300, 600]},
    "repeats": 2,
}


def test_repeated_cells_land_apart_and_report_their_variation(tmp_path: Path, console: Console) -> None:
    matrix = parse_matrix(MATRIX, "itest_repeats.yaml")
    run, reports = run_matrix(matrix, tmp_path, console)
    assert [r.status for r in reports] == ["ok"] * 4, [r.reason for r in reports]
    slow, fast = (r.cell.id for r in reports[:2])
    # rounds: both cells once, then both again
    assert [(r.cell.id, r.cell.repeat) for r in reports] == [(slow, 1), (fast, 1), (slow, 2), (fast, 2)]

    lake = Lake(tmp_path)
    for report in reports:
        folder = lake.cell_dir(run, report.cell.id, report.cell.repeat)
        assert report.path == folder and (folder / "result.json").exists()
        assert sorted(p.name for p in folder.glob("sent-p*.parquet")) == ["sent-p0.parquet"]
    rows = pq.read_table(lake.cells_path(run)).to_pylist()
    assert sorted((r["cell_id"], r["repeat"], r["repeats"]) for r in rows) == sorted(
        (c, k, 2) for c in (slow, fast) for k in (1, 2)
    )
    assert all(r["received"] == r["scheduled"] > 0 for r in rows)  # each repeat's own messages, none shared

    html = build_run_report(tmp_path, run.run_id).read_text()
    for cell in (slow, fast):
        for repeat in (1, 2):
            assert f'id="cell-{cell}-r{repeat}"' in html
            assert f'id="repeat-{cell}-r{repeat}-e2e"' in html  # a curve per repeat on the variation chart
    assert "Run-to-run variation of repeated cells" in html and "% variation" in html
    assert f'id="ratio-{slow}-r1-{fast}-r1-e2e-intended"' in html  # repeat paired with repeat
    assert f'id="ratio-{slow}-r2-{fast}-r2-e2e-intended"' in html
    assert f"ratio-{slow}-r1-{fast}-r2" not in html
