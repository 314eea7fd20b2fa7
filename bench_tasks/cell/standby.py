"""Standby generators: a generator process started before its cell is known, so that the next cell of a sweep
finds one that has done its imports and started its workers' fork server. Those take about 0.8 s of a small
host's CPU: most of a NATS cell's time before t0 on reused brokers (bench/cell_overhead.py).

The sweep's land task starts one when another cell follows on this host (`start_standby`), while its own cell
still holds the host, so its imports never fall in another cell's measurement. The next cell's provision claims
it (`claim_standby`), and from then on it is that cell's held generator (`detached.start_generator`). An
unclaimed standby ends by itself after its idle time, unless the sweep's next cell is still waiting for the host
(another sweep's cells have it), and the sweep's release task stops any left (`detached.stop_standbys`).

A standby is a Unix socket `<token>.sock` in the sweep's standby folder (mode 0700) and its record
`<token>.json` (pid and start time). Claiming renames the socket to `<token>.claimed`, which only one claimant
can do, then connects and sends the cell's work folder on one line; the generator's word ("go", or end of input)
follows on the same connection. An idle standby renames its socket to `<token>.expired` before it ends: whichever
rename comes first decides. Only cells whose generator needs no secrets in its environment take a standby (the
standby's environment is the land task's).

This module imports nothing of sixnines at the top: the standby's side runs before the generator's imports.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

STANDBY_FLAG = "--standby"
IDLE_S = 120.0  # longer than a sweep's gap between a land and the next provision, short as an orphan's life
# A cell's provision that waits for the host (Airflow's, which reschedules itself) leaves `<cell>.waiting` beside the
# cell's work folder and the sweep's standby folder; once the cell holds the host its `<cell>/state.json` is
# written. While such a cell waits, its sweep's standby waits too, up to a cell's own patience for the host (the
# sweep's release task stops it anyway).
WAITING_SUFFIX = ".waiting"
STATE_FILE = "state.json"  # work.CellWork.state (that module imports the matrix models)
SETTLED_FILES = (STATE_FILE, "skipped.json", "failure.json")  # a cell recorded, skipped, or failed before it was
HOST_WAIT_S = 6 * 3600.0  # how long a cell of a sweep waits for another sweep's cells to leave the host
LOOK_EVERY_S = 5.0
_BINDING, _CLAIMED, _EXPIRED, _SOCKET, _RECORD = ".binding", ".claimed", ".expired", ".sock", ".json"
_started: list[subprocess.Popen] = []  # this process's standbys, polled so none stays a zombie


@dataclass
class Claim:
    """A standby claimed for a cell: the connection its word travels on, and its identity (pid, create_time)."""

    word: IO[bytes]
    known: dict[str, Any]


def start_standby(folder: Path, env: dict[str, str], idle_s: float = IDLE_S) -> int:
    """Start a standby generator in `folder`; its PID. The socket is bound here, before the process starts, and
    named for claimants once the standby's record is written, so a claimant finds both at once."""
    import psutil

    reap_standbys()
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    token = secrets.token_hex(4)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with _short(folder / f"{token}{_BINDING}") as path:
            listener.bind(path)
        listener.listen(1)
        fd = str(listener.fileno())
        with open(folder / "standby.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "bench_tasks.cell.generator", STANDBY_FLAG, str(folder), token, str(idle_s), fd],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[listener.fileno()],
                env=env,
                start_new_session=True,
            )
    finally:
        listener.close()
    _started.append(proc)
    record = {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()}
    (folder / f"{token}{_RECORD}").write_text(json.dumps(record))
    os.rename(folder / f"{token}{_BINDING}", folder / f"{token}{_SOCKET}")
    return proc.pid


def claim_standby(folder: Path, root: Path) -> Claim | None:
    """Claim a standby in `folder` for the cell in work folder `root`; None when there is none to claim."""
    for sock in sorted(folder.glob(f"*{_SOCKET}")) if folder.is_dir() else []:
        claimed = sock.with_suffix(_CLAIMED)
        try:
            os.rename(sock, claimed)  # only one claimant wins it, and an expiring standby loses it
            known = json.loads(sock.with_suffix(_RECORD).read_text())
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with _short(claimed) as path:
                conn.connect(path)
        except (OSError, ValueError):
            continue
        conn.sendall(f"{root}\n".encode())
        return Claim(conn.makefile("wb"), known)
    return None


@contextlib.contextmanager
def _short(path: Path) -> Iterator[str]:
    """`path` as a socket can take it: a socket's path holds at most 107 bytes, and a sweep's folder names its run
    (/proc/self/fd/N/NAME, through the folder opened, is short whatever the folder's path)."""
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def withdraw_standbys(folder: Path) -> list[dict[str, Any]]:
    """Make the unclaimed standbys in `folder` unclaimable (as if they had expired); their records (pid and start
    time), for the caller to end them."""
    withdrawn = []
    for record in sorted(folder.glob(f"*{_RECORD}")) if folder.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            record.with_suffix(_SOCKET).rename(record.with_suffix(_EXPIRED))  # fails if claimed (or expired) before
            withdrawn.append(json.loads(record.read_text()))
    return withdrawn


def a_cell_waits(folder: Path) -> bool:
    """Whether a cell of the sweep whose standby folder is `folder` waits for the host: its provision left its
    `.waiting` marker and has neither recorded the cell nor given up (skipped, or failed)."""
    markers = folder.parent.glob(f"*{WAITING_SUFFIX}")
    return any(not any((m.with_suffix("") / f).exists() for f in SETTLED_FILES) for m in markers)


def reap_standbys() -> None:
    """Collect the exit status of this process's standbys that ended (an in-process `airflow dags test` lives on)."""
    _started[:] = [proc for proc in _started if proc.poll() is None]


class Awaiting:
    """The standby's side of its socket (`listening`: the file descriptor `start_standby` bound), which a claim
    reaches as the cell's work folder and the connection the cell's word comes on."""

    def __init__(self, folder: Path, token: str, listening: int) -> None:
        self.listener = socket.socket(fileno=listening)
        self.folder, self.token = folder, token

    def claim_within(self, idle_s: float, started_s: float) -> tuple[Path, IO[str]] | None:
        """A claim that comes within `idle_s` of `started_s` (time.monotonic()), or later while a cell of the sweep
        waits for the host (another sweep's cells have it: the next cell would start a generator of its own), up
        to HOST_WAIT_S; None: none came."""
        while True:
            now = time.monotonic()
            left = started_s + idle_s - now
            if left <= 0 and not (a_cell_waits(self.folder) and now < started_s + HOST_WAIT_S):
                return None
            claimed = self.claim(min(max(left, 0.0), LOOK_EVERY_S) or LOOK_EVERY_S)
            if claimed is not None:
                return claimed

    def claim(self, wait_s: float) -> tuple[Path, IO[str]] | None:
        """A claim that came, waiting up to `wait_s` for one (None: none came)."""
        self.listener.settimeout(max(0.001, wait_s))  # 0 would not wait at all
        try:
            conn, _ = self.listener.accept()
        except TimeoutError:
            return None
        self.listener.close()  # one claim only
        return _claimed_cell(conn)

    def expire(self) -> tuple[Path, IO[str]] | None:
        """End the standby's wait: its socket renamed, no claim can come from now on. A claim that renamed it
        first is served (its claimant connects now)."""
        sock = self.folder / f"{self.token}{_SOCKET}"
        try:
            os.rename(sock, sock.with_suffix(_EXPIRED))
        except OSError:
            if (claimed := self.claim(10.0)) is not None:
                return claimed
        self.listener.close()
        for suffix in (_CLAIMED, _EXPIRED, _RECORD):
            (self.folder / f"{self.token}{suffix}").unlink(missing_ok=True)
        return None


def _claimed_cell(conn: socket.socket) -> tuple[Path, IO[str]] | None:
    """The work folder the claimant sent and the connection its word comes on (None: it sent none)."""
    word = conn.makefile("r")
    root = Path(word.readline().strip())
    return (root, word) if str(root) != "." else None


def become_cells(root: Path, log_path: Path) -> None:
    """From here on the standby's output goes to the claimed cell's log, as a generator started for it would."""
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
        os.dup2(fd, stream.fileno())
    os.close(fd)
    print(f"standby generator {os.getpid()} claimed for {root}", flush=True)
