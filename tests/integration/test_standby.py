"""Standby generators nobody claims: they end by themselves after their idle time (later while their sweep's next
cell waits for the host), or when the sweep's release stops them, and leave nothing behind (real processes: the
generator's start-up, its fork server)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from bench_tasks.cell.detached import stop_standbys
from bench_tasks.cell.hostparts import base_env
from bench_tasks.cell.standby import LOOK_EVERY_S, STATE_FILE, WAITING_SUFFIX, claim_standby, start_standby


def _ended(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:  # its parent (if not this one) reaps it
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_an_unclaimed_standby_ends_after_its_idle_time_and_cannot_be_claimed_then(
    tmp_path: Path, no_orphans: None
) -> None:
    folder = tmp_path / ("a-sweep-run-" * 10) / "standby"  # longer than a socket's path may be
    pid = start_standby(folder, base_env(), idle_s=1.0)
    assert (folder.stat().st_mode & 0o777) == 0o700  # its socket is reachable by this user only
    assert _ended(pid, within_s=30)
    assert list(folder.glob("*.sock")) == [] and list(folder.glob("*.json")) == []  # nothing left to claim
    assert claim_standby(folder, tmp_path / "work") is None
    assert "Traceback" not in (folder / "standby.log").read_text()


def test_the_release_stops_a_standby_nobody_claimed_with_its_fork_server(tmp_path: Path, no_orphans: None) -> None:
    folder = tmp_path / "standby"
    pid = start_standby(folder, base_env())
    time.sleep(3)  # its start-up done: the fork server runs beside it
    stopped = stop_standbys(folder)
    assert pid in stopped and len(stopped) >= 2, stopped
    assert all(_ended(p, within_s=5) for p in stopped)
    assert claim_standby(folder, tmp_path / "work") is None


def test_a_standby_outlives_its_idle_time_while_its_sweeps_next_cell_waits_for_the_host(
    tmp_path: Path, no_orphans: None
) -> None:
    """Another sweep's cells hold the host: the next cell's provision waits (its `.waiting` marker, no state yet),
    and the standby waits with it rather than end and leave that cell to start a generator of its own."""
    folder = tmp_path / "standby"
    waiting = tmp_path / f"c02_nats_core_e2e{WAITING_SUFFIX}"
    waiting.write_text("2026-12-08T00:20:36+00:00")
    pid = start_standby(folder, base_env(), idle_s=1.0)
    assert not _ended(pid, within_s=4)  # past its idle time, still there to be claimed
    (tmp_path / "c02_nats_core_e2e").mkdir()
    (tmp_path / "c02_nats_core_e2e" / STATE_FILE).write_text("{}")  # the cell took the host: nobody waits now
    assert _ended(pid, within_s=LOOK_EVERY_S + 10)
    assert claim_standby(folder, tmp_path / "work") is None
