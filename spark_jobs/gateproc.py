"""Great Expectations in a process of its own, started when the analysis starts.

Importing GX takes about four seconds of Python here. On a thread of the driver it held the GIL while the
driver's own thread was building Spark plans (thousands of py4j calls, each waiting for the GIL again): the
analysis' first steps took 2–3 s longer. A spawned process imports it on the other core instead, and the gate
sends it the small pandas frames to validate; suites are built there by name, so the driver never imports GX.
"""

from __future__ import annotations

import importlib
import multiprocessing
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

# suite name -> the expectations builder making it (its parameters come with each request)
BUILDERS = {
    "raw_samples": "build_raw_samples_suite",
    "raw_cells": "build_raw_cells_suite",
    "percentile_tables": "build_percentile_tables_suite",
    "faults": "build_faults_suite",
}


def _warm() -> None:
    """Import GX. First give tqdm (GX's progress bars) a thread lock: its default also makes a multiprocessing
    semaphore, which `close` leaves behind and the resource tracker then reports as leaked at exit."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    importlib.import_module("expectations")


def validate_frame(frame: Any, name: str, parameters: tuple[Any, ...]) -> dict[str, Any]:
    """Validate a pandas frame against suite `name` built with `parameters`: the SuiteOutcome's fields as a
    dict (what crosses back to the driver)."""
    expectations = importlib.import_module("expectations")
    outcome = expectations.validate(frame, getattr(expectations, BUILDERS[name])(*parameters))
    fields = ("success", "evaluated", "failed", "result")
    return {field: getattr(outcome, field) for field in fields}


class GateProcess:
    """One worker process holding GX; `close` ends it."""

    def __init__(self) -> None:
        self.pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.warm: Future[None] = self.pool.submit(_warm)

    def validate(self, frames: dict[str, tuple[Any, tuple[Any, ...]]]) -> dict[str, dict[str, Any]]:
        """Each suite name's outcome for its (pandas frame, builder parameters)."""
        self.warm.result()
        pending = {name: self.pool.submit(validate_frame, frame, name, args) for name, (frame, args) in frames.items()}
        return {name: future.result() for name, future in pending.items()}

    def close(self) -> None:
        """Terminate the worker rather than let it exit: it holds nothing to flush, and the orderly exit of an
        interpreter with GX loaded took 0.85-1.0 s of CPU and of wall here, inside the analysis' hold on the host.
        (Python 3.14's `terminate_workers` does this; 3.11's executor keeps its processes in `_processes`.)"""
        for process in list((self.pool._processes or {}).values()):  # None once shut down
            process.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
