"""A sweep's verdict over its cells and its alerts, and the end of the run's work folders.

Airflow's last task of a run reads each cell's outcome from its work folder (`lifecycle.CellWork`: landed,
skipped, or why it never landed) and every notification record of the run in the lake: an alert whose channel
could not be reached (`delivery.failed`, written by the notifier) fails the run as a failed cell does, because
a night whose alerts went nowhere must not look green. Then it removes the run's folder in the cache: the
brokers' folders already went with each teardown, and what is left (states, generator logs, heartbeats) is of
no use once the run is judged.
It stays when it is kept on purpose (`SIXNINES_KEEP_WORK=1`, to look at a run by hand), when a cell's teardown
did not finish (what it left is evidence, and the next provision of that cell stops it), or when a cluster kept
for reuse was not released.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..lake.storage import LakePath, lake_path
from .work import CellWork

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


def run_verdict(
    base: Path, groups: Sequence[str], lake: str | LakePath, run_date: str, run_id: str
) -> tuple[dict[str, str], list[str]]:
    """(each cell's outcome, what fails the run): the cells that did not land ok, then the alerts whose
    channel could not be reached."""
    outcome = cell_outcomes(base, groups)
    problems = [f"{g}: {o}" for g, o in outcome.items() if o not in ("ok", "skipped")]
    return outcome, problems + undelivered(lake, run_date, run_id)


def undelivered(lake: str | LakePath, run_date: str, run_id: str) -> list[str]:
    """Every notification of the run whose delivery failed, naming the record, the channel and why."""
    folder = lake_path(lake) / "notifications" / f"run_date={run_date}" / f"run_id={run_id}"
    found = []
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        delivery = json.loads(path.read_text()).get("delivery") or {}
        if delivery.get("failed"):
            found.append(
                f"alert {path.name} was not delivered: channel {delivery.get('conn_id')} unreachable "
                f"({delivery['failed']})"
            )
    return found


def _kept_on_purpose() -> bool:
    return os.environ.get(KEEP_WORK_ENV, "").strip() not in ("", "0")


def discard_cell_work(folder: Path) -> str:
    """The CLI's way, one cell at a time: remove a torn-down cell's work folder unless kept on purpose, and the
    run's folder with its last cell; says which."""
    if _kept_on_purpose():
        return f"kept: {KEEP_WORK_ENV} is set"
    if (folder / "state.json").exists() and not (folder / "teardown.json").exists():
        return f"kept: cell {folder.name} was not torn down"
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):  # not empty: another cell of the run is still there
        folder.parent.rmdir()
    return f"removed {folder}"


def discard_run_work(base: Path) -> str:
    """Remove the run's work folder `base` unless it must stay (see the module docstring); says which."""
    if _kept_on_purpose():
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
