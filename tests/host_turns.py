"""Turns on the host for test modules run by parallel workers: most modules share it, and a module that gates
timing or checks host-wide state (marked `host_alone`) has it to itself. A readers-writer lock over two files
(flock): `shared` and `alone` both pass a turnstile first, and `alone` keeps the turnstile closed while it waits
for the shared holders to finish, so a stream of shared modules cannot starve it."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_tasks.cell.hostlease import HOST_LEASE_ENV, HostBusy, acquire_host, host_poll_s, release_host
from bench_tasks.cell.work import CellWork


@contextlib.contextmanager
def host_turn(folder: Path, alone: bool) -> Iterator[None]:
    """Hold the host in shared mode, or alone (exclusive), until the block ends; `folder` is shared by every
    worker of one test session."""
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        with _locked(folder / "turnstile.lock", fcntl.LOCK_EX):
            held.enter_context(_locked(folder / "host.lock", fcntl.LOCK_EX if alone else fcntl.LOCK_SH))
        yield


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[None]:
    """flock `path` in `mode`, blocking until granted; released (with the file) when the block ends."""
    with path.open("a") as handle:
        fcntl.flock(handle, mode)
        yield


@contextlib.contextmanager
def holding_the_host(work: Path) -> Iterator[None]:
    """The suite's host lease for the block, taken as a cell takes it (waiting while another worker's cell has it),
    for cells that take none themselves (on held brokers, or with a lease of their own): the other workers' cells
    then wait, and those workers give way (tests/cell_priority.py)."""
    holder = CellWork(work)
    while True:
        try:
            acquire_host(holder)
            break
        except HostBusy:
            time.sleep(host_poll_s(5.0))
    try:
        yield
    finally:
        release_host(holder)


@contextlib.contextmanager
def on_a_lease_of_its_own(folder: Path) -> Iterator[None]:
    """The suite's host lease held for the block (`holding_the_host`), while the block's own cells take turns on a
    lease of their own in `folder` (SIXNINES_HOST_LEASE): no other worker's cell runs meanwhile."""
    with holding_the_host(folder / "suite-turn"), pytest.MonkeyPatch.context() as env:
        env.setenv(HOST_LEASE_ENV, str(folder / "host.lease"))
        yield
