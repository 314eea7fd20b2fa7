"""The one call of a DAG file: every sixnines DAG of a matrices folder, into the file's globals.

A user's Airflow needs one file in its dags folder:

    from sixnines_airflow.dag_file import declare_dags
    declare_dags(globals())

The matrices folder is `SIXNINES_MATRICES`, else the Airflow Variable `sixnines_matrices`, else `matrices/`
under sixnines' home (`runtime.home`). Each `*.yaml` becomes a sweep DAG, or a capacity search's where it has a
`capacity:` block; `sixnines_compare_versions` runs any of them once per release.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import get_parsing_context

from .compare import COMPARE_DAG_ID, build_compare_dag
from .matrix_dags import build_sweep_dags
from .runtime import matrices_folder


def declare_dags(namespace: dict[str, Any]) -> None:
    """Put every DAG into `namespace` (a DAG file's `globals()`), keyed by DAG id. When Airflow runs a task, only
    that task's DAG is built (`get_parsing_context`)."""
    folder = matrices_folder()
    only = get_parsing_context().dag_id
    namespace.update(build_sweep_dags(folder, only))
    if only in (None, COMPARE_DAG_ID):
        namespace[COMPARE_DAG_ID] = build_compare_dag(folder)
