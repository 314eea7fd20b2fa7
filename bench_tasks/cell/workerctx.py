"""The process context a cell's Python workers start from, and starting it early.

Workers fork from multiprocessing's fork server, which imports the generator and every driver once
(`load/preload.py`). Starting it takes a fresh interpreter and those imports (about a second of a small host's
CPU); `prestart` begins that at the top of the generator process, so it overlaps the generator's own start-up and
the cell's set-up (brokers, routes, clock offsets) instead of delaying the first worker. This module imports
nothing of sixnines, so calling it first costs nothing.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Sequence
from multiprocessing.context import BaseContext

PRELOAD = "bench_tasks.load.preload"  # the generator and every driver (load/preload.py)


def worker_context() -> BaseContext:
    """Workers fork from multiprocessing's fork server (a fresh, single-threaded interpreter that imported
    `PRELOAD` once): a fresh process each, so the GIL couples none of them, without the imports of a spawn.
    The fork server starts in the network namespace of the thread that first needs it and every worker is
    forked from it, so a thread inside a namespace spawns instead (a worker enters its own namespace itself)."""
    if os.readlink("/proc/thread-self/ns/net") != os.readlink("/proc/self/ns/net"):
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([PRELOAD])
    return ctx


def prestart(preload: Sequence[str] = (PRELOAD,)) -> None:
    """Start the fork server (and its imports) now, in the background, if workers will fork from it.

    `preload`: what the server imports; a generator, which drives one cell, names that cell's modules only
    (`load.drivers.worker_modules`). With every driver the server's imports took 1.29 s, with the generator and
    NATS' 0.76 s, and a generator on reused brokers asked for its first worker before the longer one had ended."""
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        ctx.set_forkserver_preload(list(preload))
        forkserver.ensure_running()
