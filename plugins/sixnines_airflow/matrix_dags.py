"""A folder of matrix files as Airflow DAGs: each `*.yaml` a sweep DAG, or a capacity search's where the matrix
has a `capacity:` block, and the matrices that do not load gathered into one DAG whose import error names them.
The one entry point of the DAG file in `dags/` (it picks the factory; `sweep` and `capacity` each build one kind).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from airflow.sdk import DAG

from bench_tasks import MatrixError, SixninesError, load_matrix

from .capacity import build_capacity_dag
from .sweep import START_DATE, build_sweep_dag


def build_sweep_dags(folder: Path, only: str | None = None) -> dict[str, DAG]:
    """Every `*.yaml` in `folder` as a DAG, in sorted order, keyed by DAG id (for the DAG file's globals).
    `only`: the DAG id from `get_parsing_context()`, when a task of one DAG is being run."""
    dags: dict[str, DAG] = {}
    broken: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            matrix = load_matrix(path)
            dag_id = f"sixnines_{matrix.name}"
            if only is None or only == dag_id:
                dags[dag_id] = (
                    build_sweep_dag(matrix, path) if matrix.capacity is None else build_capacity_dag(matrix, path)
                )
        except SixninesError as exc:
            broken.append(str(exc))
        except Exception as exc:  # e.g. a schedule Airflow cannot read: still this file's problem, not the others'
            broken.append(f"{path}: {type(exc).__name__}: {exc}")
    if broken and only is None:
        dags["sixnines_broken_matrices"] = BrokenMatrices(broken)
    return dags


class BrokenMatrices(DAG):
    """Never bagged: its `validate()` raises the matrix errors, which the DagBag records as an import error of
    the DAG file, naming each broken matrix file and field."""

    def __init__(self, problems: Sequence[str]):
        super().__init__(dag_id="sixnines_broken_matrices", schedule=None, start_date=START_DATE, tags=["sixnines"])
        self.doc_md = "\n\n".join(problems)

    def validate(self) -> None:
        raise MatrixError("matrices", [p.replace("\n", " ") for p in (self.doc_md or "").split("\n\n")])
