"""Capacity searches on a real nats-server: one whose link is capped with tc tbf (so the broker's side holds a
known rate) must end by its objective or a backlog between bounds the cap sets; one asked for more than one
producer and one consumer process can move (1,000,000 msg/s of 32 B: one of each held 400,000 here, the consumer
95 % busy) and one whose producer may use 1 % of a CPU at 20,000 msg/s (`workload.cpus.producers_share`, a cgroup
quota) must end on the harness's own saturation, say so, and exit 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.capacity.run import Bounds, search_capacity, write_capacity
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.load import cpushare
from bench_tasks.report.build import build_run_report
from bench_tasks.spec.capacity import parse_objective

from .test_netns_hosts import NEEDS_NETNS, netns_cell

pytestmark = [pytest.mark.usefixtures("no_orphans"), pytest.mark.host_alone]


@NEEDS_NETNS
def test_a_search_through_a_capped_link_finds_what_the_link_holds(tmp_path: Path, console: Console) -> None:
    """1 KiB messages through links capped at 4 Mbit/s hold ~450/s (about 1.1 KB a message on the wire): the
    search must find a capacity under that and over a quarter of it, bounded by the objective or the backlog,
    with every step landed as a cell of its own."""
    place = {"producers": ["loadgen1"], "consumers": ["loadgen1"]}
    cell = netns_cell(place, {"rate_mbit": 4}, message_size_bytes=1024, rate_per_s=100, warmup_s=0.5, measure_s=2)
    lake, run = Lake(tmp_path), RunInfo.new()
    result = search_capacity(
        cell, [parse_objective("e2e p99 < 100ms")], Bounds(2000, resolution=0.25), lake, run, console
    )

    print(f"\ncapacity {result['capacity_per_s']} ({result['limit']}: {result['limit_why']})")
    for step in result["steps"]:
        print(f"  {step['rate_per_s']:>8,.0f}/s {step['verdict']:<9} {step['why']}")
    assert result["limit"] in ("objective", "backlog") and result["broker_bound"]
    assert 110 < result["capacity_per_s"] < 470
    rates = [s["rate_per_s"] for s in result["steps"]]
    assert rates[:3] == [100, 200, 400] or rates[:2] == [100, 200]  # geometric from the cell's own rate
    rows = pq.read_table(next((tmp_path / "runs").rglob("cells.parquet"))).to_pylist()
    assert sorted(r["cell_id"] for r in rows) == sorted(s["cell_id"] for s in result["steps"])
    page = Path(write_capacity(lake, run, [result])).read_text()
    assert page.count("<svg") == 1 and 'id="p99"' in page and 'id="arrived"' in page  # latency and throughput
    assert f"capacity {result['capacity_per_s']:,.0f} msg/s" in page
    report = Path(build_run_report(tmp_path, run.run_id)).read_text()  # the run's report has the same section
    assert '<section id="capacity">' in report and 'id="p99"' in report


def search_cli(tmp_path: Path, workload: str, *options: str) -> tuple[subprocess.CompletedProcess, dict]:
    """`sixnines capacity` on a one-cell NATS core matrix of `workload`; the process and its one result."""
    matrix = tmp_path / "fast.yaml"
    matrix.write_text(
        "name: fast\nsystems: [{system: nats, versions: [latest], broker: {mode: core}}]\n"
        f"workload: {{message_size_bytes: 32, warmup_s: 0.5, measure_s: 1, cooldown_s: 0.5, {workload}}}\n"
        "measurements: [e2e]\n"
    )
    args = ["capacity", str(matrix), "--slo", "e2e p99 < 1s", *options, "--lake", str(tmp_path / "l"), "--json"]
    done = subprocess.run([sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, timeout=600)
    (cell,) = json.loads(done.stdout)["cells"] if done.stdout else [{}]
    return done, cell


def test_a_search_beyond_one_producer_ends_on_the_harness(tmp_path: Path) -> None:
    done, cell = search_cli(tmp_path, "rate_per_s: 1000000", "--max-rate", "2000000")
    assert done.returncode == 1, done.stderr[-3000:]
    found = (cell["capacity_per_s"], cell["limit"], cell["broker_bound"])
    assert found == (None, "harness", False), cell.get("limit_why")
    assert "harness saturated" in cell["limit_why"] or "fell behind its schedule" in cell["limit_why"]
    assert "not the broker's" in done.stderr
    (saved,) = (tmp_path / "l").rglob("capacity.json")
    assert json.loads(saved.read_text())["cells"] == [cell]


@pytest.mark.skipif(cpushare.unavailable() is not None, reason=f"no CPU share here: {cpushare.unavailable()}")
def test_a_producer_starved_of_cpu_ends_the_search_as_the_harness(tmp_path: Path) -> None:
    """1 % of a CPU (1 ms per 100 ms CFS period) is 0.5 µs a message at 20,000 messages a second, an eighth of
    what the fastest sender here needs (4 µs: one full core held 250,000/s of 32 B); nats-server takes that rate
    easily. The search's first step must end it on the harness and never call it the broker's capacity. (At
    4,000/s a fast host sent each 100 ms period's messages in its 1 ms burst, lag p99.9 just under the 100 ms
    gate: a pass that measured the throttle, so the rate leaves no such margin.) The starved producer still
    sends all 40,000 scheduled messages, the last ~3 s after its time here, well inside the 40 s a schedule may
    overrun: the share starts once the worker is set up (on a slower CI host setup under it could outlast the 60 s
    readiness timeout), and a schedule that does overrun is the harness's too."""
    workload = "rate_per_s: 20000, cpus: {producers_share: 0.01}"
    done, cell = search_cli(tmp_path, workload, "--max-rate", "320000")
    assert done.returncode == 1, done.stderr[-3000:]
    found = (cell["capacity_per_s"], cell["limit"], cell["broker_bound"])
    assert found == (None, "harness", False), cell.get("limit_why")
    assert "fell behind its schedule" in cell["limit_why"] or "harness saturated" in cell["limit_why"]
    assert [(s["rate_per_s"], s["verdict"]) for s in cell["steps"]] == [(20000, "harness")]
    groups = Path(cpushare.V1_ROOT if cpushare.V1_ROOT.exists() else cpushare.V2_ROOT) / cpushare.PARENT
    assert not [g for s in cell["steps"] for g in groups.glob(f"{s['cell_id']}-*")]  # each step's cgroups removed
