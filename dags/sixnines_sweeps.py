"""Sweep DAGs: every `matrices/*.yaml` becomes `sixnines_<matrix name>` (see `sixnines_airflow.matrix_dags`).

A declaration only: the matrices are read relative to this file, validated and built in sorted order;
`get_parsing_context()` limits the work to one DAG when Airflow runs one of its tasks.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import get_parsing_context
from sixnines_airflow.matrix_dags import build_sweep_dags

MATRICES = Path(__file__).resolve().parent.parent / "matrices"

globals().update(build_sweep_dags(MATRICES, get_parsing_context().dag_id))
