"""A worker that fails says so in one line on the console, naming itself, the broker and the error; its traceback
goes to a log file landed with the cell. A real subprocess run of a real Redis cell whose consumer the server
refuses: `client.connect.db: 99` makes every client connection SELECT a database a default redis-server does not
have (it has 16); the workers start at once, so the consumer or the producer is refused first."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("no_orphans")

FAILING_CONSUMER = """\
name: failing_consumer
systems:
  - system: redis
    versions: [latest]
    broker: {mode: pubsub}
    client: {connect: {db: 99}}
workload:
  message_size_bytes: 128
  rate_per_s: 100
  warmup_s: 0.5
  measure_s: 1
  cooldown_s: 0.5
  drain_timeout_s: 2
measurements: [e2e]
"""


def test_a_failing_worker_prints_one_line_and_logs_its_traceback(tmp_path: Path) -> None:
    matrix = tmp_path / "failing.yaml"
    matrix.write_text(FAILING_CONSUMER)
    done = subprocess.run(
        [sys.executable, "-m", "bench_tasks", "run", str(matrix), "--lake", str(tmp_path / "lake"), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    # The workers start at once and each one's first command is refused: the cell names the first that failed.
    failed = re.search(r"(consumer|producer) 0 failed: ResponseError: DB index is out of range", cell["reason"] or "")
    assert cell["status"] == "failed" and failed, cell["reason"]
    worker = f"{failed[1]}-0"
    (line,) = [text for text in done.stderr.splitlines() if worker in text]
    assert "redis" in line and "redis://127.0.0.1:" in line  # the worker, the system and its address
    assert "ResponseError: DB index is out of range" in line  # the error: its type and the server's words
    log = (Path(cell["path"]) / f"worker-{worker}.log").read_text()  # landed with the cell
    assert "Traceback (most recent call last)" in log
    assert "redis.exceptions.ResponseError: DB index is out of range" in log
    assert f"worker-{worker}.log" in line  # the console line says where the traceback is
