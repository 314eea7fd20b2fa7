"""Where a task's run and cell live: run identity from the DAG run, the lake, the cell's work folder.

Resolved when a task runs, never at parse time. A run is stamped with its logical date (a backfill's runs
land under the dates they stand for) and an id derived from the DAG run, so re-running a DAG run replaces
its cells instead of adding a second copy.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .report_links import lake_run_id

if TYPE_CHECKING:  # the lake and the cell's steps load when a task runs, never at DAG parse time
    from bench_tasks import CellWork, LakePath, RunInfo

CHECKOUT = Path(__file__).resolve().parents[2]  # this repository, when the package runs from its checkout
POOL = "sixnines_bench"
MATRICES_ENV = "SIXNINES_MATRICES"
MATRICES_VARIABLE = "sixnines_matrices"


def home() -> Path:
    """Where sixnines keeps its matrices, lake and cache unless told otherwise: this repository when the package
    runs from its checkout (`make`, `tools/airflow`), else `$AIRFLOW_HOME/sixnines` (an installed wheel)."""
    if (CHECKOUT / "pyproject.toml").is_file() and (CHECKOUT / "bench_tasks").is_dir():
        return CHECKOUT
    return Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow") / "sixnines"


def matrices_folder() -> Path:
    """The folder whose `*.yaml` matrices become DAGs: `SIXNINES_MATRICES`, else the Airflow Variable
    `sixnines_matrices`, else `matrices/` under `home()`."""
    named = os.environ.get(MATRICES_ENV) or _variable(MATRICES_VARIABLE)
    return Path(named).expanduser() if named else home() / "matrices"


def _variable(key: str) -> str | None:
    """An Airflow Variable, or None where there is none or no metadata database to ask (a DAG file parsed
    outside Airflow's processes)."""
    from airflow.sdk import Variable

    try:
        return Variable.get(key, default=None)
    except Exception:  # no API server or database behind the task SDK here: the Variable cannot be set either
        return None


# An installed package keeps its tasks' working folders (`cache_dir()`) under its home, wherever the worker
# process was started from; a checkout keeps its own `.cache/` (`tools/airflow` and the Makefile name it).
if home() != CHECKOUT:
    os.environ.setdefault("SIXNINES_CACHE", str(home() / ".cache"))


def _mask_in_task_logs() -> None:
    """Every secret sixnines learns in a task (a matrix's password, a cell's credential, a connection's) is also
    masked by Airflow in the task's log, whatever prints it (a traceback, a library's message)."""
    from airflow.sdk.log import mask_secret

    from bench_tasks import on_remember

    on_remember(mask_secret)


_mask_in_task_logs()


def lake_root() -> LakePath:
    """`SIXNINES_LAKE` (a folder, or `s3://bucket/prefix` reached through the connection named by
    `SIXNINES_LAKE_CONN_ID`), or `lake/` under `home()`."""
    from bench_tasks import lake_path

    root = lake_path(os.environ.get("SIXNINES_LAKE") or home() / "lake")
    return root.resolve() if isinstance(root, Path) else root


def run_info(context: Any) -> RunInfo:
    """The lake's run identity: the logical date (a manual run without one: when it was due) and
    `<dag_id>__<dag run id>` with unsafe path characters replaced."""
    from bench_tasks import RunInfo

    run = context["dag_run"]
    when = run.logical_date or run.run_after
    return RunInfo(run_id=lake_run_id(run.dag_id, run.run_id), run_date=f"{when:%Y-%m-%d}")


def run_dir(context: Any) -> Path:
    from bench_tasks import cache_dir

    return cache_dir() / "airflow" / run_info(context).run_id


def group_of(context: Any) -> str:
    """The TaskGroup (cell) a task belongs to: its task id without the last part."""
    return context["ti"].task_id.rsplit(".", 1)[0]


def work_for(context: Any) -> CellWork:
    """The cell's work folder, the same for every task of the cell (so no task needs another's XCom)."""
    from bench_tasks import CellWork

    return CellWork(run_dir(context) / group_of(context))


def clusters_for(context: Any) -> Path:
    """Brokers kept for reuse in this run (policy `reuse`)."""
    return run_dir(context) / "clusters"


def standbys_for(context: Any) -> Path:
    """Standby generators of this run, started by a cell's land for the next cell's provision to claim."""
    return run_dir(context) / "standby"
