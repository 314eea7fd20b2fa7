"""The test Celery deployment's services (tests/airflow_celery.py) are watched without being reaped, so their PID
and group id stay theirs until `stop` has signalled them for the last time: a reaped leader's number is free
for the next process started, and a long test session recycles PIDs (pid_max 32768)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.airflow_celery import DIAGNOSTICS, Service, celery_env
from tests.processes import LEAVES_A_CHILD

# a leader that exits 0 on SIGTERM, as an Airflow CLI process in the foreground does (sigint_handler)
EXITS_0_ON_SIGTERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); print('up', flush=True); "
    "time.sleep(60)"
)


def _service(tmp_path: Path, code: str) -> Service:
    log = tmp_path / f"service-{len(list(tmp_path.glob('*.log')))}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out, start_new_session=True)
    return Service("svc", proc, log)


def _exited_within(service: Service, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not service.exited():
        assert time.monotonic() < deadline, "the service did not exit"
        time.sleep(0.02)


def test_an_exited_leader_stays_unreaped_until_stop_kills_its_group(tmp_path: Path, no_orphans: None) -> None:
    service = _service(tmp_path, LEAVES_A_CHILD)
    _exited_within(service)
    assert service.proc.returncode is None  # seen exited, not reaped: its PID and group id are still its own
    assert service.how_it_ended() == "exited 0"
    (child,) = _group_members(service.proc.pid)
    service.stop()
    assert service.proc.returncode == 0
    deadline = time.monotonic() + 10
    while _group_members(service.proc.pid):  # the member left behind was killed with the group
        assert time.monotonic() < deadline, child
        time.sleep(0.02)


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except ProcessLookupError:
            continue
    return members


def test_a_signal_is_told_apart_from_an_exit(tmp_path: Path, no_orphans: None) -> None:
    handled, default = _service(tmp_path, EXITS_0_ON_SIGTERM), _service(tmp_path, "import time; time.sleep(60)")
    deadline = time.monotonic() + 30
    while "up" not in handled.log.read_text():  # its handler is set
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for service in (handled, default):
        assert not service.exited() and service.how_it_ended() == "is running"
        os.kill(service.proc.pid, signal.SIGTERM)
        _exited_within(service)
    assert default.how_it_ended() == "killed by SIGTERM"
    assert handled.how_it_ended() == "exited 0"
    for service in (handled, default):
        service.stop()


def test_a_reaped_leader_s_group_id_is_never_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_orphans: None
) -> None:
    """Once reaped (here by another waiter, which Popen would report as exit 0), the group id may name a process
    started since: neither `terminate` nor `stop` signals it."""
    service = _service(tmp_path, "pass")
    os.waitpid(service.proc.pid, 0)
    sent: list[tuple[str, int, int]] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: sent.append(("kill", pid, sig)))
    monkeypatch.setattr(os, "killpg", lambda pgid, sig: sent.append(("killpg", pgid, sig)))
    assert service.exited()
    assert "reaped by another waiter" in service.how_it_ended()
    service.terminate()
    service.stop()
    assert sent == []


def test_the_deployment_s_processes_log_a_signal_their_handler_turns_into_exit_0(tmp_path: Path) -> None:
    """tests/celery_diagnostics/sitecustomize.py, first on the deployment's PYTHONPATH (celery_env): the signal
    that ended a worker with `exited 0` is in its log."""
    env = celery_env({"ROOT": str(tmp_path), "AIRFLOW_HOME": str(tmp_path / "home")}, 8080)
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(DIAGNOSTICS)
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", EXITS_0_ON_SIGTERM], stdout=out, stderr=out, env=env)
    service = Service("worker", proc, log)
    deadline = time.monotonic() + 30
    while "up" not in log.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _exited_within(service)
    assert service.how_it_ended() == "exited 0"
    assert f"[sixnines test diagnostics] pid {proc.pid} received SIGTERM at " in log.read_text()
    service.stop()
