"""The detached generator process Airflow's provision (or warmup) task starts:
`python -m bench_tasks.cell.generator ROOT [--held]`, or a standby for the next cell, `--standby FOLDER TOKEN IDLE_S FD`
(`standby.py`).

Its own entry rather than the CLI's: the workers' fork server is asked for before anything else is imported (the
CLI alone takes seconds of a small host's CPU), so its imports run beside this process's own. Held (`--held`, see
`detached.start_generator`), it starts while provision still starts the brokers, imports the cell's system
driver too, and waits on its stdin for the word to drive; end of input means provision did not finish.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
import time
from pathlib import Path
from typing import IO

from .standby import STANDBY_FLAG, STATE_FILE, Awaiting, become_cells
from .workerctx import PRELOAD, prestart

HELD_FLAG, GO = "--held", "go"  # detached.HELD_FLAG and detached.GO (that module's imports are what this one delays)


def main(argv: list[str]) -> int:
    """Drive the cell provisioned in the work folder `argv[0]`; 0 if its schedule completed (or, held, provision
    never said to drive it), 1 if it failed."""
    if argv[0] == STANDBY_FLAG:
        return standby(Path(argv[1]), argv[2], float(argv[3]), int(argv[4]))
    root = Path(argv[0])
    prestart(worker_modules(root))
    from .process import generator_main

    if HELD_FLAG in argv[1:] and not released(root, sys.stdin):
        return 0
    return generator_main(root)


def standby(folder: Path, token: str, idle_s: float, listening: int) -> int:
    """Do a generator's start-up before its cell is known, then wait up to `idle_s` for a cell's provision to
    claim it, and from then on be that cell's held generator. Every driver is imported meanwhile, one at a time
    between looks for a claim, so that a claim never waits for the drivers of other systems."""
    started_s = time.monotonic()
    awaiting = Awaiting(folder, token, listening)
    prestart()
    from ..load.drivers import every_driver_module
    from .process import generator_main
    from .work import CellWork

    claim = awaiting.claim(0)
    for module in every_driver_module():
        if claim is not None:
            break
        with contextlib.suppress(ImportError):  # a worker that needs it imports it itself and fails there
            importlib.import_module(module)
        claim = awaiting.claim(0)
    claim = claim or awaiting.claim_within(idle_s, started_s) or awaiting.expire()
    if claim is None:
        return 0
    root, word = claim
    become_cells(root, CellWork(root).log)
    return generator_main(root) if released(root, word) else 0


def worker_modules(root: Path) -> list[str]:
    """The modules the cell's workers need, as provision recorded them in `root` (read without sixnines' imports);
    every driver when none are recorded."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return list(json.loads((root / STATE_FILE).read_text())["worker_modules"])
    return [PRELOAD]


def released(root: Path, word: IO[str]) -> bool:
    """Whether provision says to drive the cell (its brokers up and recorded), waited for on `word` (stdin, or a
    standby's connection) while the cell's system driver is imported (the cell is recorded before its brokers
    start)."""
    from ..load.drivers import import_driver
    from .work import CellWork

    with contextlib.suppress(ImportError):  # a driver that cannot import fails where it is used, with its error
        import_driver(CellWork(root).cell().spec)
    if word.readline().strip() == GO:
        return True
    print("provision did not finish: nothing to drive", flush=True)
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
