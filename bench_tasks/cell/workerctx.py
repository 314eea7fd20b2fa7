"""The process context a cell's Python workers start from, and starting it early.

Workers fork from multiprocessing's fork server, which imports the generator and every driver once. Starting it
takes a fresh interpreter and those imports (about a second of a small host's CPU); `prestart` begins that at the
top of the generator process, so it overlaps the generator's own start-up and the cell's set-up (routes, clock
offsets) instead of delaying the first worker. This module imports nothing heavy, so calling it first is cheap.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import os
import sys
from multiprocessing.context import BaseContext
from typing import Any

from ..systems import SYSTEMS


def worker_context() -> BaseContext:
    """Workers fork from multiprocessing's fork server (a fresh, single-threaded interpreter that imported
    `_PRELOAD` once): a fresh process each, so the GIL couples none of them, without the imports of a spawn.
    The fork server starts in the network namespace of the thread that first needs it and every worker is
    forked from it, so a thread inside a namespace spawns instead (a worker enters its own namespace itself)."""
    if os.readlink("/proc/thread-self/ns/net") != os.readlink("/proc/self/ns/net"):
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_preload())
    return ctx


def _preload() -> list[str]:
    """What a forked worker finds imported: the generator and every system's driver with its client library. A
    spawned worker paid ~1 s of a small host's CPU for them, in every worker of every cell. pandas is not among
    them: workers build their Arrow columns without it (`lake.arrays`). (A module that fails to import is skipped
    by the fork server; the worker then imports it itself.)"""
    return ["bench_tasks.load.generator", *dict.fromkeys(_driver_module(s) for s in SYSTEMS.values())]


def _driver_module(system: Any) -> str:
    """The `driver` module of the package that defines the system or the one it is built on (valkey's is redis')."""
    for cls in type(system).__mro__:
        package = sys.modules.get(cls.__module__)
        if hasattr(package, "__path__") and importlib.util.find_spec(f"{cls.__module__}.driver"):
            return f"{cls.__module__}.driver"
    return "bench_tasks.load.driver"  # a system without a driver of its own: nothing more to preload


def prestart() -> None:
    """Start the fork server (and its imports) now, in the background, if workers will fork from it."""
    if worker_context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()
