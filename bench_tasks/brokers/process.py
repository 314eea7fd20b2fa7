"""A broker OS process we started: stop gracefully then forcibly, freeze and thaw, never orphaned.

Only processes this harness started are ever signalled, and only by their PID. `tie_to_parent` asks the
kernel to kill the broker if the harness dies (PR_SET_PDEATHSIG), so a crashed test leaves nothing
behind; Airflow turns it off because its broker must outlive the provisioning task. Every broker start runs what
follows the first fork inside `stopped_on_failure`, so a start that fails half-way stops what it started.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..errors import BrokerError

_PR_SET_PDEATHSIG = 1
_log = logging.getLogger(__name__)


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@contextlib.contextmanager
def stopped_on_failure(stop: Callable[[], object], what: str) -> Iterator[None]:
    """Run a start's steps after its first process exists: whatever fails (an exception, an interrupt), `stop`
    ends what was started before the failure propagates, so a failed start never leaves a process running that
    nothing records. A failure of `stop` itself is logged and noted on the original error, which still wins."""
    try:
        yield
    except BaseException as exc:
        try:
            stop()
        except Exception as stop_exc:
            _log.exception("stopping %s after a failed start failed too", what)
            exc.add_note(f"stopping {what} after this failure failed too: {stop_exc}")
        raise


class BrokerProcess:
    """One running broker process with its log file."""

    def __init__(self, argv: Sequence[str], log_path: Path, tie_to_parent: bool = True):
        self.argv = list(argv)
        self.log_path = log_path
        log = open(log_path, "ab")  # noqa: SIM115 - handed to the child, closed in stop()
        self._log = log
        self.popen = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent if tie_to_parent else None,
            start_new_session=not tie_to_parent,
        )
        self.pid = self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the CTRL+Z test freezes the broker without it noticing; returns once it is frozen. A broker
        that has exited is not signalled: once reaped (`alive` reaps it) its PID may name another process."""
        if self.alive():  # not reaped yet: the PID is still this process's, a zombie's at worst
            os.kill(self.pid, signal.SIGSTOP)
            wait_stopped(self.pid)

    def resume(self) -> None:
        """SIGCONT, unless it has exited (a node killed while it was frozen, then thawed at teardown)."""
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: an abrupt failure, for loss accounting."""
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
        self.popen.wait(timeout=10)

    def stop(self, grace_s: float = 10.0) -> int | None:
        """SIGTERM, wait `grace_s`, then SIGKILL. Returns the exit code."""
        if self.alive():
            os.kill(self.pid, signal.SIGCONT)  # a frozen process cannot handle SIGTERM
            self.popen.terminate()
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._log.close()
        return self.popen.returncode

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def wait_stopped(pid: int, timeout_s: float = 2.0) -> bool:
    """Wait until every thread of `pid` has stopped (or it is gone). SIGSTOP is not instant: on a busy host the
    kernel stops a multithreaded broker's threads one by one, and a Go server observed still running right after
    the signal served requests sent in that window, so a stall would start later than recorded."""
    deadline = time.monotonic() + timeout_s
    while not _threads_stopped(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def _threads_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        states = [Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0] for tid in tasks]
    except OSError:  # gone, or a thread ended while being read: look again
        return not Path(f"/proc/{pid}").exists()
    return all(state in "TtZX" for state in states)


def kill_and_wait(procs: Sequence[Any], timeout_s: float = 5.0) -> None:
    """SIGKILL processes known by their psutil handles (which check each is still the same process, not a reused
    PID), and wait until each is dead: gone, or a zombie (only its parent can collect it). The kernel tears a
    process down after the signal (memory unmapped, files closed); on a loaded host a check made right after the
    kill found one still running."""
    import psutil

    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    deadline = time.monotonic() + timeout_s
    while any(_running(proc) for proc in procs) and time.monotonic() < deadline:
        time.sleep(0.01)


def _running(proc: Any) -> bool:
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def terminate_checked(pid: int, expected_name: str) -> Any:
    """SIGCONT then SIGTERM `pid` once its command line shows it is an `expected_name` process (a stalled node
    must run to exit); its psutil.Process. Raises psutil.NoSuchProcess when it is gone or has ended."""
    import psutil

    proc = psutil.Process(pid)
    if expected_name not in " ".join(_command_line(proc)):
        raise BrokerError(f"pid {pid} is not a {expected_name} process; refusing to signal it")
    proc.send_signal(signal.SIGCONT)
    proc.terminate()
    return proc


def _command_line(proc: Any, exiting_s: float = 2.0) -> list[str]:
    """`proc`'s command line. A process in the middle of exiting has none left (a RabbitMQ port helper whose VM
    just died, once): it is given `exiting_s` to finish, and then raises psutil.NoSuchProcess (or its
    ZombieProcess) like one that has gone."""
    deadline = time.monotonic() + exiting_s
    while not (cmdline := proc.cmdline()) and time.monotonic() < deadline:
        time.sleep(0.02)
    return cmdline


def stop_pid(pid: int, expected_name: str, grace_s: float = 10.0) -> bool:
    """Stop a detached broker by PID (CLI `brokers down`), after checking it is the process we think it is."""
    import psutil

    try:
        proc = terminate_checked(pid, expected_name)
        try:
            proc.wait(timeout=grace_s)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    except psutil.NoSuchProcess:
        return False
    return True
