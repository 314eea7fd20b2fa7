"""A harness that cannot keep up must fail its cell and say so, never land its own queue as the broker's latency.

The consumer is starved on purpose from the cell's t0 to the end of its measure phase: its CPU (pinned with
`workload.cpus.receivers`) is shared with a busy loop, and every thread of the consumer is reniced to 19, so it
gets about 1.5 % of that CPU: far less than the rate needs. Messages then pile up in front of the harness
(librdkafka's fetch queue, the consumer's socket), and the cell must fail with `harness saturated: consumer c0 …`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.cell.work import CellWork
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.paths import cache_dir
from bench_tasks.spec.matrix_model import Cell

from .helpers import make_cell, schedule_phases

pytestmark = [pytest.mark.serial, pytest.mark.usefixtures("no_orphans"), pytest.mark.host_alone]
STARVED_NICE = 19  # weight 15 against a busy loop's 1024: about 1.5 % of the shared CPU
PHASES = {"warmup_s": 1, "measure_s": 4, "cooldown_s": 1, "drain_timeout_s": 3}
RENICE_EVERY_S = 0.1  # again and again: a client may start a thread while starved


def _find(title: str, deadline: float) -> psutil.Process | None:
    while time.monotonic() < deadline:
        for proc in psutil.Process().children(recursive=True):
            try:
                if " ".join(proc.cmdline()).startswith(title):
                    return proc
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    return None


def _renice(proc: psutil.Process, nice: int) -> None:
    """Every thread: Linux keeps a nice value per thread (librdkafka's and the driver's included)."""
    for thread in proc.threads():
        try:
            os.setpriority(os.PRIO_PROCESS, thread.id, nice)
        except ProcessLookupError:
            continue


@contextmanager
def starved_consumer(cell: Cell, run: RunInfo, cpu: int) -> Iterator[dict]:
    """From the cell's t0 to its measure phase's end, share the consumer's CPU with a busy loop and renice the
    consumer's threads (to 19); then give it its CPU back so the cell can drain and land quickly."""
    seen: dict = {}
    status = CellWork(cache_dir() / "runs" / run.run_id / cell.instance).status

    def starve() -> None:
        deadline = time.monotonic() + 120
        consumer = _find(f"sixnines consumer-0 cell {cell.id}", deadline)
        # from t0 (every worker ready): starving earlier kept the consumer, started beside the producer, from
        # subscribing until the starvation had ended, and the measure phase ran unstarved
        phases = schedule_phases(status, deadline) if consumer else None
        if consumer is None or phases is None:
            return
        until_ns = phases["measure"][1]
        hog = subprocess.Popen(
            [sys.executable, "-c", "while True: pass"], preexec_fn=lambda: os.sched_setaffinity(0, {cpu})
        )
        try:
            while time.monotonic_ns() < until_ns:
                _renice(consumer, STARVED_NICE)
                seen["starved"] = True
                time.sleep(RENICE_EVERY_S)
            _renice(consumer, 0)
        except psutil.NoSuchProcess:
            pass
        finally:
            hog.kill()
            hog.wait()

    thread = threading.Thread(target=starve, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        thread.join(timeout=130)


@pytest.mark.parametrize(
    ("system", "rate"),
    [("kafka", 20_000), ("nats", 40_000)],
)
def test_a_starved_consumer_fails_the_cell_as_harness_saturation(
    system: str, rate: int, tmp_path: Path, console: Console
) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs: one for the starved consumer, one for the broker and the producer")
    cell = make_cell(
        "e2e",
        system=system,
        broker=None if system == "nats" else {"partitions": 1},
        client={} if system == "nats" else {"producer": {"acks": "1"}},
        message_size_bytes=100,
        rate_per_s=rate,
        cpus={"receivers": [0], "producers": [1], "broker": [1]},
        **PHASES,
    )
    run = RunInfo.new()
    with starved_consumer(cell, run, cpu=0) as seen:
        report = run_cell(cell, Lake(tmp_path), run, console)

    assert seen.get("starved"), "the consumer was never starved"
    assert report.status == "failed"
    assert report.reason is not None and "harness saturated: consumer c0" in report.reason, report.reason
    facts = json.loads((report.path / "result.json").read_text())["harness"]
    consumer = facts["workers"]["consumer c0"]
    if consumer["samples"] < 2:  # starved so hard that its own watcher barely ran: that is the reason given
        assert "could not even watch itself" in report.reason and consumer["window_s"] >= 1.0
        return
    starved = [
        t for t, v in consumer["threads"].items() if v["waiting_for_cpu"] >= 0.1 and v["mean_cpu_wait_us"] >= 1e3
    ]
    backed_up = consumer["backlog"] is not None and consumer["backlog"]["share_over_limit"] > 0.5
    assert starved or backed_up or consumer["busy"] >= 0.97, consumer  # the facts back the reason
    assert facts["workers"]["producer p0"]["samples"] >= 2  # the producer's own view is recorded beside it
    print(f"\n{system} @ {rate}/s with a starved consumer: {report.reason}")
    print(json.dumps(consumer, indent=1))
