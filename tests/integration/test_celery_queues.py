"""The sweep DAG through a real CeleryExecutor (tests/airflow_celery.py): API server, one Celery worker per queue
(default, loadgen_1, loadgen_2), `airflow dags test --use-executor` or the scheduler. A cell whose load is placed
on two real hosts (`lg1` on queue loadgen_1, `lg2` on loadgen_2) has one generate task per host: each must run on
the worker serving its host's queue, both at the same time (they meet on one schedule through the lake), and
everything else on the default worker, as the metadata DB records it; and the cell must land ok.

Data-driven: each task instance must have run on the worker of its own `queue`."""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench_tasks.cell.hostlease import HOST_LEASE_ENV
from tests.airflow_celery import celery_airflow
from tests.airflow_project import airflow_project
from tests.host_turns import holding_the_host

pytestmark = [pytest.mark.integration, pytest.mark.celery, pytest.mark.timeout(1500)]
DAG_ID = "sixnines_itest_celery"
TINY = """
name: itest_celery
description: one tiny core NATS cell whose load runs on load-generator hosts lg1 and lg2 (queues loadgen_1/_2)
schedule: "0 2 * * *"
hosts:
  lg1: {queue: loadgen_1}
  lg2: {queue: loadgen_2}
systems:
  - system: nats
    versions: [latest]
    broker: {mode: core}
workload:
  message_size_bytes: 256
  rate_per_s: 500
  producers: 2
  consumers: 2
  warmup_s: 0.5
  measure_s: 1
  cooldown_s: 0.5
  drain_timeout_s: 2
  max_schedule_lag_ms: 1000  # three workers on two shared cores: routing is tested here, the lag gate elsewhere
  placement: {producers: [lg1, lg2], consumers: [lg1, lg2]}  # each host's consumer reads its own producer
measurements: [e2e]
"""


def test_tasks_run_on_the_worker_of_their_queue(tmp_path: Path, no_orphans: None) -> None:
    """One deployment, both ways a run is made: `airflow dags test --use-executor` (no scheduler: pools are not
    enforced), then the scheduler and DAG processor making and running the DAG's scheduled run, pools and all,
    as a deployment does."""
    env = airflow_project(tmp_path / "project", {"itest_celery": TINY})
    # The DAG's cells take a lease of their own, and this test holds the suite's while they run (holding_the_host):
    # the suite's lease in the DAG's tasks would have them wait for this test, and `dags test --use-executor` fails
    # a task rescheduled sooner than it hears of the reschedule (seen at the suite's 0.2 s).
    env[HOST_LEASE_ENV] = str(Path(env["SIXNINES_CACHE"]) / "host.lease")
    started = time.monotonic()
    # The suite's lease through both runs, tails (tables, the Spark analysis, the report) included: left to the
    # other workers' cells, a tail ran at idle priority and the test took 557-567 s instead of ~166 s (clean-clone
    # runs), which then bounded the whole cell part (1,225 s).
    with celery_airflow(env) as deployment, holding_the_host(tmp_path / "celery-dag-runs"):
        ready = time.monotonic()
        done = deployment.dags_test(DAG_ID, "2026-03-03", timeout=900)
        tested = time.monotonic()
        scheduled = deployment.run_scheduled(DAG_ID, timeout=900)
        tis = deployment.task_instances(DAG_ID)
        executed_by = deployment.executed_by()
        logs = deployment.logs()
    print(
        f"deployment up in {ready - started:.0f} s; dags test through Celery {tested - ready:.0f} s; "
        f"scheduled run {time.monotonic() - tested:.0f} s"
    )
    assert done.returncode == 0, done.stdout[-5000:] + logs[-8000:]
    assert scheduled["state"] == "success", logs[-8000:]
    assert deployment.leftovers == [], deployment.leftovers
    runs = {str(t["run_id"]) for t in tis}
    assert len(runs) == 2 and str(scheduled["run_id"]) in runs, runs
    for run_id in sorted(runs):
        _assert_routed(deployment.workers, [t for t in tis if t["run_id"] == run_id], executed_by)
    landed = sorted((Path(env["SIXNINES_LAKE"]) / "runs").glob("run_date=*/run_id=*/cells.parquet"))
    assert len(landed) == 2, landed
    for cells_path in landed:
        _assert_landed_ok(cells_path)


def _assert_routed(workers: dict[str, str], tis: list[dict], executed_by: dict[str, str]) -> None:
    """Every task instance of one run ran on the worker host serving its own queue: as Airflow recorded it (the
    TI's hostname) and as Celery did (the worker whose log shows it executing that TI's workload); the two hosts'
    generate tasks ran at the same time."""
    assert tis and all(ti["state"] == "success" for ti in tis), [(t["task_id"], t["state"]) for t in tis]
    wrong = [
        (t["task_id"], t["queue"], t["hostname"], executed_by.get(t["id"]))
        for t in tis
        if not t["hostname"] == executed_by.get(t["id"]) == workers.get(t["queue"])
    ]
    assert wrong == [], f"task instances not run by their queue's worker {workers}: {wrong}"
    assert {t["queue"] for t in tis} == {"default", "loadgen_1", "loadgen_2"}
    generate = {str(t["task_id"]).rsplit(".", 1)[1]: t for t in tis if ".generate_" in str(t["task_id"])}
    assert {name: t["queue"] for name, t in generate.items()} == {
        "generate_lg1": "loadgen_1",
        "generate_lg2": "loadgen_2",
    }
    starts = [dt.datetime.fromisoformat(str(t["start_date"])) for t in generate.values()]
    ends = [dt.datetime.fromisoformat(str(t["end_date"])) for t in generate.values()]
    assert max(starts) < min(ends), "the two hosts' generate tasks did not run at the same time"


def _assert_landed_ok(cells_path: Path) -> None:
    (row,) = pq.read_table(cells_path).to_pylist()
    assert row["status"] == "ok", row["reason"]
    assert row["received"] == row["scheduled"] == 500 and row["lost"] == 0
    generators = json.loads(row["context_json"])["hosts"]["generators"]
    assert {h: (g["queue"], g["status"]) for h, g in generators.items()} == {
        "lg1": ("loadgen_1", "ok"),
        "lg2": ("loadgen_2", "ok"),
    }
