"""How a worker process that fails says so: one line on its stderr (the console of a CLI run, the detached
generator's log under Airflow) naming the worker, its broker and the error; the whole traceback in a log file of
the worker's own in the cell's staging folder, which is landed with the cell; a `failed` event that tells the
parent the same error; and exit code 1, which tells it too. Left to multiprocessing, the exception would print
thirty lines of traceback to the console, the same in every worker that met it, and the line that says what
happened would be the last of them.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..secrecy import without_userinfo

if TYPE_CHECKING:
    from .plan import WorkerPlan


def worker_log(plan: WorkerPlan) -> Path:
    """Where a worker's traceback goes: its own file in the cell's staging folder (landed with the cell)."""
    return Path(plan.staging_dir) / f"worker-{plan.role}-{plan.index}.log"


def one_line(exc: BaseException) -> str:
    """The error as one line: its type and message (a message of several lines joined), no URL credentials."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return without_userinfo(text)


def failure_line(plan: WorkerPlan, error: str, logged: str) -> str:
    """The console line: which worker of which cell, on which system at which address, failed with what."""
    system = json.loads(plan.cell_json).get("system", "?")
    where = f"{system} at {without_userinfo(plan.url)}"
    return f"{plan.role}-{plan.index} of cell {plan.cell_id} ({where}) failed: {error} ({logged})"


def report_failure(plan: WorkerPlan, events: Any, exc: BaseException) -> None:
    """Say that this worker failed, once each: to the parent (a `failed` event), to the cell's log (the traceback)
    and to the console (one line). Call it from the `except` block that caught `exc`."""
    error = one_line(exc)
    events.put({"kind": "failed", "role": plan.role, "index": plan.index, "error": error})
    trace = without_userinfo(traceback.format_exc())
    log = worker_log(plan)
    try:
        log.write_text(trace)
    except OSError as why:
        line = failure_line(plan, error, f"traceback not written to {log.name}: {why.strerror or why}")
        print(line, trace, sep="\n", end="", file=sys.stderr, flush=True)  # the console is the only place left
        return
    print(failure_line(plan, error, f"traceback in {log.name}, landed with the cell"), file=sys.stderr, flush=True)
