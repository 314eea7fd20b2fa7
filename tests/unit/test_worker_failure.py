"""A failed worker's report: one console line (worker, broker, error; no credentials), the traceback in its log
file, the same error in the parent's `failed` event. Pure: no process, no broker (the real one:
tests/integration/test_worker_failure.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench_tasks.load.failure import one_line, report_failure, worker_log
from bench_tasks.load.plan import WorkerPlan


def plan(staging: Path, url: str = "nats://bench:hunter2@127.0.0.1:4222") -> WorkerPlan:
    return WorkerPlan("consumer", 0, url, "abc123", json.dumps({"system": "nats"}), str(staging))


def failed(p: WorkerPlan, exc: Exception) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []

    class Events:
        put = events.append

    try:
        raise exc
    except Exception as caught:
        report_failure(p, Events, caught)
    return events


def test_the_error_is_one_line_with_its_type_and_no_credentials() -> None:
    exc = OSError("cannot reach nats://bench:hunter2@10.0.0.1:4222\n  after 3 tries")
    assert one_line(exc) == "OSError: cannot reach nats://10.0.0.1:4222 after 3 tries"
    assert one_line(TimeoutError()) == "TimeoutError"


def test_a_failure_is_one_console_line_and_a_logged_traceback(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    events = failed(plan(tmp_path), ConnectionRefusedError("nats: no servers available for connection"))

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "hunter2" not in err
    assert err.startswith("consumer-0 of cell abc123 (nats at nats://127.0.0.1:4222) failed: ConnectionRefusedError")
    assert "(traceback in worker-consumer-0.log, landed with the cell)" in err
    log = worker_log(plan(tmp_path)).read_text()
    assert log.startswith("Traceback (most recent call last)") and "no servers available" in log
    assert events == [
        {"kind": "failed", "role": "consumer", "index": 0, "error": "ConnectionRefusedError: nats: no servers "
         "available for connection"}
    ]  # fmt: skip


def test_a_traceback_that_cannot_be_written_still_reaches_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    failed(plan(tmp_path / "gone"), ValueError("bad"))
    first, *rest = capsys.readouterr().err.splitlines()
    assert "ValueError: bad (traceback not written to worker-consumer-0.log" in first
    assert rest[0] == "Traceback (most recent call last):" and rest[-1] == "ValueError: bad"
