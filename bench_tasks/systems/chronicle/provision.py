"""A Chronicle cell's "brokers": its queue root folder (tmpfs or disk) and the keeper process that holds it, as the
broker-control protocol's `StartedBrokers`. The queues themselves are created by the first JVM worker that
appends to or tails them (the JVM worker's ChronicleTransport); node 0 is the keeper, so the watch sees a cell whose
keeper died, and teardown (by PID, from any process) removes a tmpfs queue with it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from ...brokers.process import wait_stopped
from .keeper import PROCESS_NAME
from .release import libs
from .settings import ChronicleCell

TMPFS_ROOT = Path("/dev/shm") / "sixnines-chronicle"
_PR_SET_PDEATHSIG = 1


def queue_root(spec: ChronicleCell, names: str, workdir: Path) -> Path:
    """Where the cell's queue folders go: its own folder on tmpfs (memory only) or in its work folder (disk)."""
    if spec.broker.storage == "tmpfs":
        return TMPFS_ROOT / f"{names}-{secrets.token_hex(4)}"
    return workdir / "queues"


class Keeper:
    """Node 0 of a Chronicle cell: the keeper process of its queue folder."""

    def __init__(self, root: Path, workdir: Path, tie_to_parent: bool):
        self.log_path = workdir / "keeper.log"
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", PROCESS_NAME, str(root)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_stop_with_parent if tie_to_parent else None,
                start_new_session=not tie_to_parent,
            )

    @property
    def node_pids(self) -> dict[int, int]:
        return {0: self.popen.pid}

    def pause(self, node: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGSTOP)
            wait_stopped(self.popen.pid)

    def resume(self, node: int) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGCONT)

    def kill(self, node: int) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(10)

    def alive(self) -> dict[int, bool]:
        return {0: self.popen.poll() is None}

    def stop(self) -> list[int]:
        ran = [self.popen.pid] if self.popen.poll() is None else []
        if ran:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGCONT)
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
        return ran


def _stop_with_parent() -> None:  # in the child between fork and exec
    """SIGTERM, not SIGKILL, when the starting thread ends: the keeper still removes its folder."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_brokers(spec: ChronicleCell, names: str, workdir: Path, tie_to_parent: bool, host: str) -> StartedBrokers:
    release = libs(spec.version)  # fetched and verified here, not in the first worker's start
    workdir.mkdir(parents=True, exist_ok=True)
    root = queue_root(spec, names, workdir)
    root.mkdir(parents=True, exist_ok=True)
    keeper = Keeper(root, workdir, tie_to_parent)
    b = spec.broker
    context = {
        "version": spec.version,
        "storage": b.storage,
        "root": str(root),
        "roll_cycle": b.roll_cycle,
        "wait": b.wait,
        "jars": sorted(p.name for p in release.glob("*.jar")),
    }
    return StartedBrokers(
        address=str(root),
        nodes=keeper,
        process_name=PROCESS_NAME,
        workdir=workdir,
        context=context,
        logs=[keeper.log_path],
    )


def describe_running(state: Mapping[str, Any]) -> list[str]:
    context = state.get("context") or {}
    return [f"Chronicle Queue {context.get('version', '?')} on {context.get('storage', '?')}: {context.get('root')}"]
