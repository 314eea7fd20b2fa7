"""Turns on the host for test modules run by parallel workers: most modules share it, and a module that gates
timing or checks host-wide state (marked `host_alone`) has it to itself. A readers-writer lock over two files
(flock): `shared` and `alone` both pass a turnstile first, and `alone` keeps the turnstile closed while it waits
for the shared holders to finish, so a stream of shared modules cannot starve it."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


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
