"""Seed 002's "how much higher" chart from real cells: a Chronicle Queue chain (JVM workers, tmpfs) and a Kafka
chain (a real broker) at the same measurement, size and rate, landed in one run, then the run's report."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from bench_tasks.cell.landing import CellReport
from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.report import build_run_report

from .helpers import make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")

WORKLOAD = {"message_size_bytes": 512, "rate_per_s": 1000}


def _p(report: CellReport, key: str) -> float:
    summary = report.analysis.metrics["e2e"]["intended"]
    return summary.max_ns if key == "max" else summary.percentiles[key]


def test_report_sets_two_systems_side_by_side_per_percentile(tmp_path: Path, console: Console) -> None:
    chronicle = make_cell("chain", {"storage": "tmpfs"}, "chronicle", "2026.4", warmup_s=1.0, **WORKLOAD)
    kafka = make_cell(
        "chain",
        {"brokers": 1, "partitions": 2},
        "kafka",
        newest_kafka(),
        client={"producer": {"acks": "1", "linger.ms": 1}},
        relays=2,
        consumers=2,
        warmup_s=2.0,
        **WORKLOAD,
    )
    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    reports = {cell.id: run_cell(cell, lake, run, console) for cell in (chronicle, kafka)}
    assert [r.status for r in reports.values()] == ["ok", "ok"], [r.reason for r in reports.values()]

    html = build_run_report(lake.root, run.run_id).read_text()
    section = html[html.index('<section id="systems">') :]
    section = section[: section.index("</section>")]
    assert '<a href="#systems">' in html
    assert "chain 512 B @ 1,000 msg/s: chronicle · kafka" in section

    # The fastest is the lower e2e response-time p99, as landed; the other is drawn over it, both bases.
    fast, slow = sorted(reports, key=lambda cid: _p(reports[cid], "99"))
    assert f"[{fast}]" in section.split("spec fields that differ")[0]
    for basis in ("intended", "sent"):
        assert f'id="systems-1-e2e-{slow}-{basis}"' in section
        assert f'id="systems-1-e2e-{fast}-{basis}"' not in section  # the reference is the line at 1
    for metric in ("hop1", "hop2"):  # every metric both chains measured
        assert f'id="systems-1-{metric}-{slow}-intended"' in section

    # Each ratio is the landed cells' own percentiles divided, never an average.
    table = section[section.index("<caption>e2e: percentiles") :]
    rows = re.findall(r"<tr>(.*?)</tr>", table[: table.index("</table>")])
    ratio_rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows if "response time × fastest" in r]
    by_cell = dict(zip((fast, slow), ratio_rows, strict=True))  # table rows follow the run's cell order
    if list(reports) != [fast, slow]:
        by_cell = dict(zip((slow, fast), ratio_rows, strict=True))
    for i, key in enumerate(("50", "90", "99", "99.9"), start=2):
        assert by_cell[fast][i] == "1"
        assert by_cell[slow][i] == f"{_p(reports[slow], key) / _p(reports[fast], key):.3g}"
    assert by_cell[slow][-1] == f"{_p(reports[slow], 'max') / _p(reports[fast], 'max'):.3g}"
    assert by_cell[slow][6] == "unsup."  # p99.9999 of 1,000 samples is not stated, so it has no ratio
