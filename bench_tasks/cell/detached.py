"""The detached generator: the process that drives a cell's schedule for Airflow, outliving the task that started
it (`generator.json` names it), found again by the phase watchers and stopped by teardown."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from ..brokers.handles import reap_if_child
from ..brokers.process import kill_and_wait
from ..errors import CellError
from ..lake.layout import write_json
from ..lake.storage import lake_path
from ..spec.kept import cell_from
from ..topology.netns import Topology
from .hostparts import child_env, secret_env
from .standby import claim_standby, reap_standbys, withdraw_standbys
from .work import CellWork

_GENERATOR_GRACE_S = 30.0  # SIGTERM → the generator reaps its workers and writes its facts
HELD_FLAG, GO = "--held", b"go\n"  # a generator started before its brokers, and the word that lets it drive
_held: dict[Path, IO[bytes]] = {}  # where this process's held generators wait for their word, by work folder


def work_token(work: CellWork) -> str:
    """A short token unique to this cell's work folder (run and group): names its network namespaces."""
    return hashlib.sha256(str(work.root.resolve()).encode()).hexdigest()[:8]


def topology_of(state: dict[str, Any] | None) -> Topology | None:
    """The cell's namespaces as provision recorded them in its placement plan (None: the cell runs in the root
    namespace, or provisioning never began)."""
    data = ((state or {}).get("placement") or {}).get("topology")
    return Topology.from_dict(data) if data else None


def start_generator(work: CellWork, held: bool = False, standbys: Path | None = None) -> int:
    """Start the one process that drives the whole schedule (warmup → measure → cooldown → drain), detached in
    its own session so it outlives the task that started it. Calling it again returns the running one; a
    generator that already ended cannot be restarted (its schedule is gone).

    `held`: started while provision is still starting the brokers (the cell recorded, its brokers not yet), it
    spends that time on its imports and its workers' fork server and waits for `release_generator`'s word. A
    Kafka broker takes seconds to start, about what the generator's start-up takes on a small host.

    `standbys` (held only): a folder of standby generators (`standby.py`) whose start-up is already done; one is
    claimed instead of starting a process, unless the cell's generator needs secrets in its environment."""
    known = work.read(work.generator)
    if known is not None:
        if generator_alive(work, known):
            return int(known["pid"])
        raise CellError(work.cell().id, "the generator of this cell already ran; re-run the cell from provision")
    state = work.read(work.state)
    if state is None or (state.get("brokers") is None and not held):
        raise CellError("?", f"cannot start a generator: no provisioned brokers in {work.root}")
    cell, lake = cell_from(state), lake_path(state["lake"])
    if held and standbys is not None and not secret_env(cell, lake):
        claim = claim_standby(standbys, work.root)
        if claim is not None:
            _held[work.root] = claim.word
            write_json(work.generator, claim.known)
            return int(claim.known["pid"])
    env = child_env(cell, lake)
    with open(work.log, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench_tasks.cell.generator", str(work.root), *([HELD_FLAG] if held else [])],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if held else subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    if held and proc.stdin is not None:
        _held[work.root] = proc.stdin
    import psutil

    write_json(work.generator, {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()})
    return proc.pid


def release_generator(work: CellWork, go: bool) -> None:
    """Tell the generator `start_generator(held=True)` started to drive its cell (`go`: the brokers are up and
    recorded) or to end without driving (provision failed). The word travels on its stdin (a claimed standby's:
    on its connection), which closes with this process too: a generator whose provision task died ends as if
    told no. Nothing to do for a generator
    that was not held."""
    word = _held.pop(work.root, None)
    if word is None:
        return
    with contextlib.suppress(OSError):  # a generator that already died: its watchers report it
        word.write(GO if go else b"")
        word.close()
    if not go:
        known = work.read(work.generator)
        deadline = time.monotonic() + _GENERATOR_GRACE_S
        while known is not None and process_alive(known) and time.monotonic() < deadline:
            time.sleep(0.02)
        work.generator.unlink(missing_ok=True)  # no generator ran for this cell


def stop_generator(work: CellWork, grace_s: float = _GENERATOR_GRACE_S) -> list[int]:
    """SIGTERM the generator (it then reaps its workers and records its partial run), wait, then SIGKILL
    whatever is left of its process group. Returns the PIDs that had to be signalled."""
    known = work.read(work.generator)
    if known is None:
        return []
    signalled = []
    if _signal_generator(work, known, signal.SIGTERM):
        signalled.append(int(known["pid"]))
        deadline = time.monotonic() + grace_s
        while generator_alive(work, known) and time.monotonic() < deadline:
            time.sleep(0.1)
    group = generator_group(known)
    signalled += [proc.pid for proc in group]
    # teardown checks for survivors right after this: each killed member must be gone by then
    kill_and_wait(group)
    for pid in signalled:
        reap_if_child(pid)
    return signalled


def generator_alive(work: CellWork, known: dict[str, Any]) -> bool:
    """The recorded generator still runs (process_alive)."""
    return process_alive(known)


def process_alive(known: dict[str, Any]) -> bool:
    """The recorded process still runs (same PID *and* start time, so a recycled PID does not count). A zombie
    of it is reaped, if it is this process's child; a process that now holds its PID is left alone (waiting on it
    would take the exit status of a child of ours that merely got the same number)."""
    import psutil

    try:
        proc = psutil.Process(int(known["pid"]))
        if abs(proc.create_time() - float(known["create_time"])) >= 0.01:
            return False
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    reap_if_child(int(known["pid"]))
    return False


def _signal_generator(work: CellWork, known: dict[str, Any], sig: int) -> bool:
    """Send `sig` to the recorded generator if it still runs; whether it was sent. Through a pidfd opened before
    its identity is checked: the signal reaches that very process or none, never one that was given its PID
    between the check and the signal."""
    try:
        pidfd = os.pidfd_open(int(known["pid"]))
    except ProcessLookupError:
        return False
    try:
        if not generator_alive(work, known):
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except ProcessLookupError:  # it ended since the check
        return False
    finally:
        os.close(pidfd)


def generator_group(known: dict[str, Any] | None) -> list[Any]:
    """Live processes of the generator's session (its workers, multiprocessing's helpers): the group id is the
    generator's PID, and each member started after it. A group id is never given to a new process while any
    process is in that group; once the whole group is gone it is a free PID again, and a session leader started
    since (a Celery worker, a detached broker) may hold it: when a process other than the generator has its PID,
    the generator's group is empty and nothing is matched."""
    import psutil

    if known is None:
        return []
    pgid, since = int(known["pid"]), float(known["create_time"])
    with contextlib.suppress(psutil.NoSuchProcess):
        if abs(psutil.Process(pgid).create_time() - since) >= 0.01:
            return []
    members = []
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if (
                os.getpgid(proc.pid) == pgid
                and proc.info["create_time"] >= since - 0.01
                and proc.info["status"] != psutil.STATUS_ZOMBIE
                and (proc.pid != pgid or abs(proc.info["create_time"] - since) < 0.01)  # given the PID meanwhile
            ):
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members


def stop_standbys(folder: Path) -> list[int]:
    """End the standby generators in `folder` that nobody claimed, with their fork servers (a claimed one is a
    cell's generator, which that cell's teardown stops); the PIDs signalled."""
    stopped = []
    for known in withdraw_standbys(folder):
        group = generator_group(known)
        kill_and_wait(group)
        for proc in group:
            reap_if_child(proc.pid)
        stopped += [proc.pid for proc in group]
    reap_standbys()
    return stopped
