"""The session summary's lease line (tests/lease_usage.py) counts what the lease file says while it says it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil

from tests.lease_usage import LeaseClockPerTest, LeaseUsage, top_holders


def test_time_is_counted_per_holder_and_cells_by_their_work_folder(tmp_path: Path) -> None:
    lease = tmp_path / "host.lease"
    usage = LeaseUsage(lease).start()
    lease.write_text(json.dumps({"work": "/w/a", "cell": "a"}))
    time.sleep(0.4)
    lease.write_text(json.dumps({"analyses": [{"run": "r"}]}))
    time.sleep(0.3)
    lease.unlink()
    time.sleep(0.3)
    line = usage.line()
    assert usage.cells == {"/w/a"} and usage.cells_s >= 0.25 and usage.analyses_s >= 0.15
    assert usage.cells_s + usage.analyses_s <= time.monotonic() - usage.started - 0.25  # not while it was free
    assert "by 1 cell(s)" in line


def _taker(pid: int) -> dict:
    return {"pid": pid, "create_time": psutil.Process(pid).create_time()}


def test_a_test_is_charged_for_the_leases_its_own_process_tree_took(tmp_path: Path) -> None:
    """A cell taken by this process or a child counts for the test running then; another process's cell, or a
    lease held between tests, counts for none."""
    lease = tmp_path / "host.lease"
    clock = LeaseClockPerTest(lease).start()
    child = subprocess.Popen(["sleep", "30"])
    try:
        clock.current = "t::own"
        lease.write_text(json.dumps({"work": "/w/a", "taker": _taker(os.getpid())}))
        time.sleep(0.4)
        clock.current = "t::child"
        lease.write_text(json.dumps({"analyses": [{"run": "r", "taker": _taker(child.pid)}]}))
        time.sleep(0.4)
        clock.current = "t::other"  # this process's parent: running, not of its tree
        lease.write_text(json.dumps({"work": "/w/b", "taker": _taker(os.getppid())}))
        time.sleep(0.3)
        clock.current = None
        lease.write_text(json.dumps({"work": "/w/c", "taker": _taker(os.getpid())}))
        time.sleep(0.3)
    finally:
        child.kill()
        child.wait()
    held = clock.stop()
    assert 0.2 <= held["t::own"] <= 0.8 and 0.2 <= held["t::child"] <= 0.8, held
    assert "t::other" not in held and sum(held.values()) <= 1.2, held


def test_the_longest_holders_are_listed_first_and_tests_that_held_nothing_not_at_all() -> None:
    lines = top_holders({"t::a": 1.0, "t::b": 3.0, "t::c": 0.0})
    assert lines == ["    3.0s lease  t::b", "    1.0s lease  t::a"]
