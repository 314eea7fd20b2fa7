"""The session summary's lease lines (tests/lease_usage.py): what the lease file says is charged to its holder, and
to the running test when this process tree took it. Driven step by step (`count`), not by the watch threads' clock:
these tests run beside the cell part, in a group that gives way to cells, where a thread may wait seconds for a CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.lease_usage import LeaseClockPerTest, LeaseUsage, top_holders


def test_time_is_counted_per_holder_and_cells_by_their_work_folder(tmp_path: Path) -> None:
    usage = LeaseUsage(tmp_path / "host.lease")
    usage.count({"work": "/w/a", "cell": "a"}, 0.4)
    usage.count({"work": "/w/a", "cell": "a"}, 0.1)
    usage.count({"analyses": [{"run": "r"}]}, 0.3)
    usage.count(None, 5.0)  # free
    assert usage.cells == {"/w/a"} and usage.cells_s == pytest.approx(0.5) and usage.analyses_s == pytest.approx(0.3)
    assert "by 1 cell(s)" in usage.line()


def test_cell_time_is_summed_by_the_system_its_state_records(tmp_path: Path) -> None:
    """A cell's seconds go to the system its work folder's state names, once that state is written; until then
    (and for a holder that is no cell, a test holding the host) to "no cell record"."""
    usage = LeaseUsage(tmp_path / "host.lease")
    kafka, holder = tmp_path / "kafka-cell", tmp_path / "held-by-a-test"
    kafka.mkdir()
    usage.count({"work": str(kafka)}, 0.2)  # lease taken, state not written yet
    (kafka / "state.json").write_text(json.dumps({"cell": {"spec": {"system": "kafka"}}}))
    usage.count({"work": str(kafka)}, 3.0)
    usage.count({"work": str(holder)}, 1.5)
    assert usage.by_system == {"kafka": pytest.approx(3.0), "no cell record": pytest.approx(1.7)}
    assert "by the cells' system: kafka 3 s (1 cell(s)), no cell record 2 s" in usage.line()


def test_the_watch_reads_the_lease_file(tmp_path: Path) -> None:
    lease = tmp_path / "host.lease"
    lease.write_text(json.dumps({"work": "/w/a", "cell": "a"}))
    usage = LeaseUsage(lease).start()
    deadline = time.monotonic() + 30
    while not usage.cells and time.monotonic() < deadline:
        time.sleep(0.05)
    line = usage.line()  # stops the watch
    assert usage.cells == {"/w/a"}, line


def _taker(pid: int) -> dict:
    return {"pid": pid, "create_time": psutil.Process(pid).create_time()}


@pytest.fixture
def child() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "30"])
    yield proc.pid
    proc.kill()
    proc.wait()


def test_a_test_is_charged_for_the_leases_its_own_process_tree_took(tmp_path: Path, child: int) -> None:
    """A cell taken by this process or a child counts for the test running then; another process's cell, or a
    lease held between tests, counts for none."""
    clock = LeaseClockPerTest(tmp_path / "host.lease")
    clock.current = "t::own"
    clock.count({"work": "/w/a", "taker": _taker(os.getpid())}, 0.4)
    clock.current = "t::child"
    clock.count({"analyses": [{"run": "r", "taker": _taker(child)}]}, 0.3)
    clock.current = "t::other"  # this process's parent: running, not of its tree
    clock.count({"work": "/w/b", "taker": _taker(os.getppid())}, 0.2)
    clock.count(None, 0.2)
    clock.current = None
    clock.count({"work": "/w/c", "taker": _taker(os.getpid())}, 0.3)
    assert clock.stop() == {"t::own": 0.4, "t::child": 0.3}


def test_the_longest_holders_are_listed_first_and_tests_that_held_nothing_not_at_all() -> None:
    lines = top_holders({"t::a": 1.0, "t::b": 3.0, "t::c": 0.0})
    assert lines == ["    3.0s lease  t::b", "    1.0s lease  t::a"]
