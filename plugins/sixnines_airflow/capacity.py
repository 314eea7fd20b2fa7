"""A matrix with `capacity:` becomes a search DAG: one task per cell, chained one at a time, each searching that
cell's highest rate under the matrix's objectives; then the run's capacity page (capacity.json, which the
analysis makes tables of), the landed steps' tables, the analysis tail and report, and a verdict.

One task per cell, not one per step: how many steps a search takes, and at which rates, is known only as it
runs (each rate follows from the verdict of the one before). Dynamic task mapping expands once from an upstream
result, and a sensor-driven loop would re-run tasks; so each task runs its cell's whole search in-process, as
`sixnines capacity` does: every step is a full cell (fresh brokers, warmup, measure, cooldown) that lands its
raw samples and its row in this run, and the task log shows each step as it ends. The searches' results pass
to the summary task as XCom (a few kilobytes each)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, dag, get_current_context, task

from bench_tasks import Matrix

from . import tail
from .runtime import POOL, lake_root, run_info
from .sweep import cell_groups, matrix_dag_settings, tables

log = logging.getLogger("sixnines")


def build_capacity_dag(matrix: Matrix, source: Path) -> DAG:
    @dag(**matrix_dag_settings(matrix, "capacity", _doc(matrix, source)))
    def capacity_search() -> None:
        previous, results = None, []
        for group, cell in cell_groups(matrix):
            searched = search.override(task_id=f"search_{group}")(str(source), cell.id)
            if previous is not None:
                previous >> searched
            previous = searched
            results.append(searched)
        written = write_searches(results)
        written >> tables() >> tail.analysis() >> tail.regressions() >> tail.report() >> verdict(written)

    return capacity_search()


@task(pool=POOL, retries=0)
def search(source: str, cell_id: str) -> dict[str, Any]:
    """One cell's whole search (`bench_tasks.capacity`), in-process; its result."""
    from rich.console import Console

    from bench_tasks import Bounds, Lake, load_matrix, prepare_cell, search_capacity

    matrix = load_matrix(source)
    (base,) = [c for c in matrix.cells if c.id == cell_id]  # the id at parse time, before `latest` resolves
    cell = prepare_cell(base)
    spec = matrix.capacity
    assert spec is not None  # only capacity matrices build this DAG
    bounds = Bounds.of(spec)
    console = Console(width=120, force_terminal=False, no_color=True)
    result = search_capacity(cell, spec.parsed(), bounds, Lake(lake_root()), run_info(get_current_context()), console)
    log.info("capacity of %s: %s (%s: %s)", cell.label, result["capacity_per_s"], result["limit"], result["limit_why"])
    return result


@task(retries=0, trigger_rule="all_done")
def write_searches(results: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Write the run's capacity.json and capacity.html before the analysis reads them (whatever the searches'
    outcome: a failed one is evidence too); what the verdict needs."""
    from bench_tasks import Lake, write_capacity

    done = [r for r in results if r]
    where = write_capacity(Lake(lake_root()), run_info(get_current_context()), done)
    log.info("capacity page: %s", where)
    not_broker = [f"{r['label']}: {r['limit_why']}" for r in done if not r["broker_bound"] and r["limit"] != "max-rate"]
    return {"page": where, "unfinished": len(results) - len(done), "not_broker": not_broker}


@task(retries=0, trigger_rule="all_done")
def verdict(written: dict[str, Any]) -> str:
    """Fail the run when a search did not finish or ended on the harness or a failed cell (that capacity is not
    the broker's); the run's state follows this last task."""
    from airflow.sdk.exceptions import AirflowFailException

    if written["unfinished"] or written["not_broker"]:
        raise AirflowFailException(
            f"{written['unfinished']} search(es) did not finish; not the broker's capacity: {written['not_broker']}"
        )
    return str(written["page"])


def _doc(matrix: Matrix, source: Path) -> str:
    rows = "\n".join(f"| `search_{group}` | {c.label} |" for group, c in cell_groups(matrix))
    spec = matrix.capacity
    return (
        f"# sixnines capacity search: {matrix.name}\n\n{matrix.description}\n\n"
        f"Objectives: {', '.join(spec.objectives) if spec else ''}; rates up to {spec.max_rate_per_s if spec else ''}"
        f"/s. Each task searches one cell (docs/capacity.md).\n\n| task | cell |\n|---|---|\n{rows}\n"
    )
