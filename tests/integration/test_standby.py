"""Standby generators nobody claims: they end by themselves after their idle time, or when the sweep's release
stops them, and leave nothing behind (real processes: the generator's start-up, its fork server)."""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from bench_tasks.cell.detached import stop_standbys
from bench_tasks.cell.hostparts import base_env
from bench_tasks.cell.standby import claim_standby, start_standby


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
