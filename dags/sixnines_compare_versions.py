"""`sixnines_compare_versions`: run one matrix once per version of a system, then compare (see
`sixnines_airflow.compare`). A declaration only."""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import get_parsing_context
from sixnines_airflow.compare import build_compare_dag

MATRICES = Path(__file__).resolve().parent.parent / "matrices"

if get_parsing_context().dag_id in (None, "sixnines_compare_versions"):
    dag = build_compare_dag(MATRICES)
