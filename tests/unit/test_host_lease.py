"""The host lease without brokers: a holder this checkout cannot judge keeps the host, and so does a cell still
starting its brokers; `host_idle` waits for the host and holds it; how often a waiting cell asks again; local
analyses share the host with each other and keep cells off it."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest

from bench_tasks.cell.hostlease import (
    HostBusy,
    acquire_host,
    analysis_holds_host,
    host_for_analysis,
    host_idle,
    host_poll_s,
    release_host,
)
from bench_tasks.cell.work import CellWork
from bench_tasks.errors import SixninesError


@pytest.fixture(autouse=True)
def _analyses_hold_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default, whatever the suite's own workers are told (tests/conftest.py)."""
    monkeypatch.delenv("SIXNINES_ANALYSIS_HOLDS_HOST", raising=False)
    monkeypatch.delenv("SIXNINES_TEARDOWN_HOLDS_HOST", raising=False)


def test_a_holder_of_a_system_this_checkout_lacks_keeps_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checkouts share one cache (and so one lease); a cell of a system only the other one has must not
    crash this one's provisioning, nor be taken over while its nodes run (asked by PID and process name)."""
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SIXNINES_HOST_LEASE", raising=False)
    (tmp_path / "cache").mkdir()
    other = CellWork(tmp_path / "other")
    other.root.mkdir()
    me = psutil.Process()  # this test's own process plays the other checkout's running node
    node, name = {"1": me.pid}, " ".join(me.cmdline())
    brokers = {"system": "some-future-system", "nodes": node, "process_name": name, "address": "127.0.0.1:1"}
    other.state.write_text(json.dumps({"brokers": brokers}))
    (tmp_path / "cache" / "host.lease").write_text(json.dumps({"work": str(other.root), "cell": "x", "since": "now"}))
    mine = CellWork(tmp_path / "mine")
    with pytest.raises(HostBusy, match="busy with cell x"):
        acquire_host(mine)
    brokers["nodes"] = {"1": 2**22 + 1}  # its node gone (a PID above Linux's maximum): stale, taken over
    other.state.write_text(json.dumps({"brokers": brokers}))
    acquire_host(mine)
    release_host(mine)
    assert not (tmp_path / "cache" / "host.lease").exists()


@pytest.fixture
def other_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CellWork:
    """Another cell's work folder, nothing recorded in it yet (it is provisioning), in this test's own cache."""
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("SIXNINES_HOST_LEASE", raising=False)
    (tmp_path / "cache").mkdir()
    other = CellWork(tmp_path / "other")
    other.root.mkdir()
    return other


def _lease_taken_by(other: CellWork, taker: subprocess.Popen) -> None:
    started = psutil.Process(taker.pid).create_time()
    lease = {
        "work": str(other.root),
        "cell": "other",
        "since": "now",
        "taker": {"pid": taker.pid, "create_time": started},
    }
    (other.root.parent / "cache" / "host.lease").write_text(json.dumps(lease))


def test_a_cell_still_starting_its_brokers_keeps_the_host(tmp_path: Path, other_cell: CellWork) -> None:
    """Until its brokers are recorded, the process that took the lease running is what keeps it: a broker that
    takes seconds to start must not hand the host to the next cell (seen with two test workers)."""
    taker = subprocess.Popen(["sleep", "60"])
    try:
        _lease_taken_by(other_cell, taker)
        mine = CellWork(tmp_path / "mine")
        with pytest.raises(HostBusy, match="busy with cell other"):
            acquire_host(mine)
        other_cell.state.write_text(json.dumps({"brokers": None, "failure": None}))  # recorded, still starting
        with pytest.raises(HostBusy, match="busy with cell other"):
            acquire_host(mine)
    finally:
        taker.kill()
        taker.wait()
    acquire_host(mine)  # its taker gone before any broker was recorded: stale
    release_host(mine)


def test_a_cell_on_external_brokers_keeps_the_host_while_its_taker_runs(tmp_path: Path, other_cell: CellWork) -> None:
    """External brokers are no process of the cell's: between provision and its load (a CLI cell, in one process),
    the process that took the lease keeps the host. Judged by the nodes alone, the lease was stale there and a
    second cell started beside the first (seen in a clean-clone run: its consumer then waited ~50 ms per wake-up)."""
    taker = subprocess.Popen(["sleep", "60"])
    mine = CellWork(tmp_path / "mine")
    try:
        _lease_taken_by(other_cell, taker)
        external = {"kind": "external", "system": "kafka", "nodes": {}, "process_name": "", "address": "k:9092"}
        other_cell.state.write_text(json.dumps({"brokers": external, "failure": None}))
        with pytest.raises(HostBusy, match="busy with cell other"):
            acquire_host(mine)
    finally:
        taker.kill()
        taker.wait()
    acquire_host(mine)  # its taker gone and no generator running: stale
    release_host(mine)


def test_a_failed_provision_leaves_the_host_at_once(tmp_path: Path, other_cell: CellWork) -> None:
    taker = subprocess.Popen(["sleep", "60"])
    try:
        _lease_taken_by(other_cell, taker)
        other_cell.state.write_text(json.dumps({"brokers": None, "failure": "provision: no such release"}))
        acquire_host(CellWork(tmp_path / "mine"))
    finally:
        taker.kill()
        taker.wait()


def test_host_idle_waits_for_the_holder_then_holds_the_host(tmp_path: Path, other_cell: CellWork) -> None:
    """`netns-clean` runs inside it: while a cell holds the host it waits; inside, no cell can take the host."""
    taker = subprocess.Popen(["sleep", "60"])
    _lease_taken_by(other_cell, taker)
    threading.Timer(0.3, taker.kill).start()
    told: list[str] = []
    began = time.monotonic()
    with host_idle(poll_s=0.05, on_wait=told.append):
        waited = time.monotonic() - began
        grabbed: list[BaseException] = []
        grab = threading.Thread(target=lambda: _try(grabbed, CellWork(tmp_path / "mine")))
        grab.start()
        grab.join(0.3)
        assert grab.is_alive()  # blocked on the lease's lock until the block ends
    grab.join(5)
    taker.wait()
    assert waited >= 0.25 and told == [told[0]] and "busy with cell other" in told[0]
    assert not grabbed and json.loads((tmp_path / "cache" / "host.lease").read_text())["cell"] == "mine"


def _try(errors: list[BaseException], work: CellWork) -> None:
    try:
        acquire_host(work)
    except BaseException as exc:
        errors.append(exc)


@pytest.mark.parametrize("raw", ["abc", "0", "-1", "7200", "nan"])
def test_a_bad_poll_interval_names_the_variable(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIXNINES_HOST_POLL_S", raw)
    with pytest.raises(SixninesError, match=f"SIXNINES_HOST_POLL_S='{raw}': expected seconds above 0"):
        host_poll_s(5.0)


def test_the_poll_interval_is_the_callers_unless_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SIXNINES_HOST_POLL_S", raising=False)
    assert host_poll_s(5.0) == 5.0
    monkeypatch.setenv("SIXNINES_HOST_POLL_S", "")  # docker-compose's `${SIXNINES_HOST_POLL_S:-}` when unset
    assert host_poll_s(5.0) == 5.0
    monkeypatch.setenv("SIXNINES_HOST_POLL_S", "0.25")
    assert host_poll_s(5.0) == 0.25


def test_projects_with_caches_of_their_own_take_turns_on_the_lease_they_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SIXNINES_HOST_LEASE` names the host's lease whatever the cache: a cell of one project keeps another
    project's off the host; unset, each cache has a lease of its own."""
    first, second = CellWork(tmp_path / "first"), CellWork(tmp_path / "second")
    monkeypatch.setenv("SIXNINES_HOST_LEASE", str(tmp_path / "host" / "sixnines.lease"))
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache-a"))
    acquire_host(first)
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache-b"))
    with pytest.raises(HostBusy, match="busy with cell first"):
        acquire_host(second)
    assert json.loads((tmp_path / "host" / "sixnines.lease").read_text())["cell"] == "first"
    monkeypatch.setenv("SIXNINES_HOST_LEASE", "")  # docker-compose's `${SIXNINES_HOST_LEASE:-}` when unset
    acquire_host(second)
    assert json.loads((tmp_path / "cache-b" / "host.lease").read_text())["cell"] == "second"


def _lease(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "cache" / "host.lease").read_text())


def test_analyses_share_the_host_and_keep_cells_off_it(tmp_path: Path, other_cell: CellWork) -> None:
    """A local analysis holds the host against cells, not against another analysis; the last one out frees it."""
    mine = CellWork(tmp_path / "mine")
    told: list[str] = []
    with host_for_analysis("run-a", on_wait=told.append):
        with pytest.raises(HostBusy, match="analysis of run run-a"):
            acquire_host(mine)
        with host_for_analysis("run-b", on_wait=told.append):
            assert [a["run"] for a in _lease(tmp_path)["analyses"]] == ["run-a", "run-b"]
        assert [a["run"] for a in _lease(tmp_path)["analyses"]] == ["run-a"]
        with pytest.raises(HostBusy, match="analysis of run run-a"):
            acquire_host(mine)
    assert told == [] and not (tmp_path / "cache" / "host.lease").exists()
    acquire_host(mine)
    release_host(mine)


def test_an_analysis_waits_for_the_cell_holding_the_host(tmp_path: Path, other_cell: CellWork) -> None:
    taker = subprocess.Popen(["sleep", "60"])
    _lease_taken_by(other_cell, taker)
    threading.Timer(0.3, taker.kill).start()
    told: list[str] = []
    began = time.monotonic()
    with host_for_analysis("run-a", poll_s=0.05, on_wait=told.append):
        waited = time.monotonic() - began
        with pytest.raises(HostBusy, match="analysis of run run-a"):
            acquire_host(CellWork(tmp_path / "mine"))
    taker.wait()
    assert waited >= 0.25 and len(told) == 1 and "busy with cell other" in told[0]


def test_an_analysis_beside_a_cell_of_its_own_process_does_not_wait_for_itself(
    tmp_path: Path, other_cell: CellWork
) -> None:
    """A test (or `dags test`) that holds a cell's lease and analyses in the same process tree goes ahead, and
    leaves that cell's lease as it was."""
    acquire_host(other_cell)  # taken by this very process
    before = _lease(tmp_path)
    with host_for_analysis("run-a", on_wait=pytest.fail):
        assert _lease(tmp_path) == before
    assert _lease(tmp_path) == before
    release_host(other_cell)


def test_the_lease_of_an_analysis_whose_process_is_gone_is_stale(tmp_path: Path, other_cell: CellWork) -> None:
    gone = subprocess.Popen(["true"])
    started = psutil.Process(gone.pid).create_time()
    gone.wait()
    entry = {"run": "run-a", "since": "now", "taker": {"pid": gone.pid, "create_time": started}, "id": "x"}
    (tmp_path / "cache" / "host.lease").write_text(json.dumps({"analyses": [entry]}))
    mine = CellWork(tmp_path / "mine")
    acquire_host(mine)
    assert _lease(tmp_path)["cell"] == "mine"
    release_host(mine)


def test_an_analysis_told_not_to_hold_the_host_leaves_the_lease_alone(
    tmp_path: Path, other_cell: CellWork, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where something else keeps analyses off measuring cells (the suite's idle cgroups), `0` turns the hold off:
    a cell starts beside the analysis, and the analysis does not wait for a cell."""
    monkeypatch.setenv("SIXNINES_ANALYSIS_HOLDS_HOST", "0")
    mine = CellWork(tmp_path / "mine")
    with host_for_analysis("run-a", on_wait=pytest.fail):
        assert not (tmp_path / "cache" / "host.lease").exists()
        acquire_host(mine)
        with host_for_analysis("run-b", on_wait=pytest.fail):
            assert _lease(tmp_path)["cell"] == "mine"
    release_host(mine)


def test_a_bad_analysis_hold_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SIXNINES_ANALYSIS_HOLDS_HOST", "no")
    with pytest.raises(SixninesError, match="SIXNINES_ANALYSIS_HOLDS_HOST='no': expected 0 or 1"):
        analysis_holds_host()
