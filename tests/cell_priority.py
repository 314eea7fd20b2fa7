"""Every worker of the cell part (`make test`, `--beside-cells`) gives way to the other workers' cells: it and
everything it starts run in a cgroup of their own whose `cpu.idle` is on while another worker's cell holds the host
lease.

Why: the lease keeps two cells apart, but not what a worker does between its cells. The beside worker's files
start Airflow's processes and a standalone Spark cluster's JVMs; the other cell worker starts a test module's
brokers, an S3 server, Airflow's CLI or a Spark session, none of it under the lease. On two cores that work beside
a measuring cell starved the cell's threads in a clean-clone run (its consumer waited for a CPU 19 % of the
measure phase, 1.6 ms per wake-up), and the harness rightly failed the cell as saturated. (A group is idle only
while the lease is truly another's: a cell whose lease was wrongly judged stale and taken over would run idle in
its own worker's group, as one on external brokers once did: bench_tasks.cell.hostlease._lease_stale.)

How: the threads of an idle group run only on CPU time that no other thread wants, and a thread outside it that
wakes gets its CPU at once (the kernel's SCHED_IDLE rule, for the whole group). A group rather than a scheduling
policy per thread: the daemons a test leaves running under init (a Spark master, a broker a provision task
started) stay in it. A watcher process outside the group, never idle itself, reads the lease every 50 ms (the
file is replaced atomically: no lock) and switches the group: idle while a cell taken by a process outside the
group holds the host; normal while the host is free or analysed (nothing measures then), while a cell the group
took holds it (its own cell then runs beside idle groups only). A test whose cells take a lease of their own holds
the suite's lease while they run, as a cell would (tests/integration/test_celery_queues.py), so its group stays
normal and the other groups idle.

Needs root and a cgroup cpu controller with `cpu.idle` (Linux 5.15 or later): `make test` asks
`python -m tests.cell_priority --check` and runs the cell part without groups (and without a beside worker) where
it says why not."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from bench_tasks.load import cpushare

PREFIX = "sixnines-give-way-"
POLL_S = 0.05
LAST_S = 60.0  # a group's last processes, after the worker, are awaited this long before the group is left


def unavailable() -> str | None:
    """Why this host cannot run an idle group (None: it can), found by making one and removing it."""
    try:
        _make_group(f"{PREFIX}check-{os.getpid()}").rmdir()
    except OSError as err:
        return str(err)
    return None


def _make_group(name: str) -> Path:
    """A cgroup directly under the cpu controller's root (an idle group gives way only to its siblings)."""
    why_not = cpushare.unavailable()
    found = cpushare.controller_root()
    if why_not or found is None:
        raise OSError(why_not)
    root, version = found
    if version == 2:  # v2 hands the controller to a child only when the parent enables it
        (root / "cgroup.subtree_control").write_text("+cpu")
    group = root / name
    group.mkdir(exist_ok=True)
    if not (group / "cpu.idle").exists():
        group.rmdir()
        raise OSError(f"{group} has no cpu.idle (Linux 5.15 or later)")
    return group


def give_way(lease: Path) -> Path | None:
    """Run this process, and what it starts from now on, in an idle-when-needed group until it exits; the group, or
    None with a warning where the host has none. The watcher removes the group once the process has ended and the
    group is empty (a pytest worker's fork server and resource tracker end with it, not before)."""
    try:
        group = _make_group(f"{PREFIX}{os.getpid()}")
    except OSError as err:
        warnings.warn(f"this worker runs at normal priority beside the other workers' cells: {err}", stacklevel=2)
        return None
    # Started before this process moves: the watcher stays in the root group, so it is never idle itself.
    watch_me = [str(os.getpid()), str(group), str(lease)]
    subprocess.Popen([sys.executable, "-m", "tests.cell_priority", *watch_me], start_new_session=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def watch(pid: int, group: Path, lease: Path, poll_s: float = POLL_S) -> None:
    """Switch `group` idle or normal as the lease changes hands, until process `pid` ends; then remove the
    group."""
    member = psutil.Process(pid)
    judged: dict[tuple[Any, ...], bool] = {}
    idle = False
    while _running(member):
        wanted = _another_cell_holds(lease, group, judged)
        if wanted != idle:
            (group / "cpu.idle").write_text("1" if wanted else "0")
            idle = wanted
        time.sleep(poll_s)
    _remove(group)


def _another_cell_holds(lease: Path, group: Path, judged: dict[tuple[Any, ...], bool]) -> bool:
    """A cell taken by a process outside `group` holds `lease`. Each holder is judged once, when first seen, while
    the process that took the lease still runs (`judged` keeps the last verdict)."""
    holder = _holder(lease)
    if holder is None or "work" not in holder:
        return False
    key = (holder["work"], holder.get("since"))
    if key not in judged:
        judged.clear()
        judged[key] = not _taken_in(group, holder.get("taker"))
    return judged[key]


def _running(process: psutil.Process) -> bool:
    """Running and not a zombie: an exited process its parent has not reaped yet has ended too."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _holder(lease: Path) -> dict[str, Any] | None:
    try:
        return json.loads(lease.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _taken_in(group: Path, taker: dict[str, Any] | None) -> bool:
    """The lease was taken by a process of `group` (a process that has ended is no longer listed: not ours)."""
    if not taker:
        return False
    return str(taker["pid"]) in (group / "cgroup.procs").read_text().split()


def _remove(group: Path) -> None:
    """Remove the group once the processes in it have ended (a process still inside keeps it: left, with a word)."""
    deadline = time.monotonic() + LAST_S
    while group.exists():
        try:
            group.rmdir()
        except OSError:
            if time.monotonic() > deadline:
                print(f"{group}: still holds {(group / 'cgroup.procs').read_text().split()}", file=sys.stderr)
                return
            time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 0 if this host can run an idle group, else 1")
    parser.add_argument("pid", nargs="?", type=int, help="watch until this process ends")
    parser.add_argument("group", nargs="?", type=Path)
    parser.add_argument("lease", nargs="?", type=Path)
    args = parser.parse_args(argv)
    if args.check:
        why = unavailable()
        if why:
            print(f"no idle groups (and no beside worker): {why}", file=sys.stderr)
        return 1 if why else 0
    if args.lease is None:
        parser.error("give --check, or PID GROUP LEASE")
    with contextlib.suppress(KeyboardInterrupt, psutil.NoSuchProcess):
        watch(args.pid, args.group, args.lease)
    return 0


if __name__ == "__main__":
    sys.exit(main())
