"""The suite's safety net for a failed cell test (tests/conftest.py `_no_lease_left_held`): a test whose own
process still holds the host lease errors and gives it back, so the next test's cell is not kept waiting; a lease
the next cell would take over anyway (stale) is no error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFTEST = "from tests.conftest import _no_lease_left_held  # noqa: F401\n"
TESTS = """
from bench_tasks.cell.hostlease import acquire_host, release_host
from bench_tasks.cell.work import CellWork


def test_a_cell_that_fails_before_its_teardown(tmp_path):
    acquire_host(CellWork(tmp_path / "left"))


def test_a_provision_that_failed_before_its_brokers_leaves_a_stale_lease(tmp_path):
    work = CellWork(tmp_path / "refused")
    acquire_host(work)
    work.root.mkdir()
    work.state.write_text('{"brokers": null, "failure": "provision: refused"}')  # any next cell takes it over


def test_the_next_cell_takes_the_host(tmp_path):
    work = CellWork(tmp_path / "next")
    acquire_host(work)  # HostBusy if the lease were still held
    release_host(work)
"""


def test_a_lease_left_held_errors_its_test_and_frees_the_host(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_cells.py").write_text(TESTS)
    env = {**os.environ, "PYTHONPATH": str(REPO), "SIXNINES_HOST_LEASE": str(tmp_path / "host.lease")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", "test_cells.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert "ERROR test_cells.py::test_a_cell_that_fails_before_its_teardown" in out, out[-3000:]
    assert "left its cell holding the host lease" in out
    assert "PASSED test_cells.py::test_the_next_cell_takes_the_host" in out, out[-3000:]
    assert "PASSED test_cells.py::test_a_provision_that_failed_before_its_brokers_leaves_a_stale_lease" in out
    assert "3 passed, 1 error" in out  # the first test's call passed; its teardown is the error
