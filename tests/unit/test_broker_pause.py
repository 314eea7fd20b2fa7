"""Pausing a broker returns only once every one of its threads is frozen (SIGSTOP reaches a busy process's threads
one by one; a server seen running right after the signal answered requests sent in that window)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from bench_tasks.brokers.process import BrokerProcess, _threads_stopped, wait_stopped

BUSY = """
import threading
def spin():
    while True:
        pass
for _ in range(4):
    threading.Thread(target=spin).start()
"""


def test_pause_returns_with_every_thread_stopped_and_resume_thaws_them(tmp_path: Path, no_orphans: None) -> None:
    proc = BrokerProcess([sys.executable, "-c", BUSY], tmp_path / "busy.log")
    try:
        for _ in range(20):
            proc.pause()
            assert _threads_stopped(proc.pid)
            proc.resume()
        assert wait_stopped(proc.pid, timeout_s=0.05) is False  # running again
    finally:
        proc.stop(grace_s=0.5)


def test_a_process_that_is_gone_counts_as_stopped(tmp_path: Path, no_orphans: None) -> None:
    proc = BrokerProcess([sys.executable, "-c", "pass"], tmp_path / "done.log")
    proc.popen.wait(timeout=10)
    proc.stop()
    assert wait_stopped(proc.pid, timeout_s=0.1) is True


def test_a_broker_that_has_exited_is_not_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_orphans: None
) -> None:
    """Once reaped, its PID may already name another process (a stall or thaw of a node a fault killed)."""
    proc = BrokerProcess([sys.executable, "-c", "pass"], tmp_path / "done.log")
    proc.popen.wait(timeout=10)
    sent: list[tuple[int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append((pid, sig)))
    proc.pause()
    proc.resume()
    proc.stop()
    assert sent == []
