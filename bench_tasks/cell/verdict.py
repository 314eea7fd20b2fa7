"""A sweep's verdict over its cells, read from their work folders, and the end of those folders.

Airflow's last task of a run reads each cell's outcome from its work folder (`lifecycle.CellWork`: landed,
skipped, or why it never landed), then removes the run's folder in the cache: the brokers' folders already went
with each teardown, and what is left (states, generator logs, heartbeats) is of no use once the run is judged.
It stays when it is kept on purpose (`SIXNINES_KEEP_WORK=1`, to look at a run by hand), when a cell's teardown
did not finish (what it left is evidence, and the next provision of that cell stops it), or when a cluster kept
for reuse was not released.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from .lifecycle import CellWork

KEEP_WORK_ENV = "SIXNINES_KEEP_WORK"


def cell_outcomes(base: Path, groups: Sequence[str]) -> dict[str, str]:
    """Each cell group of the run in `base`: `ok`, `skipped`, `failed: <reason>` or `not landed: <why>`."""
    outcome: dict[str, str] = {}
    for group in groups:
        work = CellWork(base / group)
        landed = work.read(work.landed)
        if (work.root / "skipped.json").exists():
            outcome[group] = "skipped"
        elif landed is None:
            failure = work.read(work.root / "failure.json") or {}
            outcome[group] = f"not landed: {failure.get('reason', 'see the task log of its land task')}"
        else:
            outcome[group] = "ok" if landed["status"] == "ok" else f"failed: {landed['reason']}"
    return outcome


def discard_run_work(base: Path) -> str:
    """Remove the run's work folder `base` unless it must stay (see the module docstring); says which."""
    if os.environ.get(KEEP_WORK_ENV, "").strip() not in ("", "0"):
        return f"kept: {KEEP_WORK_ENV} is set"
    if not base.exists():
        return "removed (nothing was left)"
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and p.name != "clusters"):
        if (folder / "state.json").exists() and not (folder / "teardown.json").exists():
            return f"kept: cell {folder.name} was not torn down"
    for entry in sorted((base / "clusters").glob("*.json")):
        return f"kept: cluster {entry.stem} kept for reuse was not released"
    shutil.rmtree(base)
    return f"removed {base}"
