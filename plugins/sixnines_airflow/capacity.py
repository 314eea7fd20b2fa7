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
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk import DAG, dag, get_current_context, task

from bench_tasks import Cell, Matrix, max_search_steps

from . import tail
from .cell_tasks import cell_seconds, cell_timeout
from .runtime import POOL, lake_root, run_info
from .sweep import cell_groups, matrix_dag_settings, tables

if TYPE_CHECKING:
    from bench_tasks import CapacitySpec

log = logging.getLogger("sixnines")


def build_capacity_dag(matrix: Matrix, source: Path) -> DAG:
    spec = matrix.capacity
    assert spec is not None  # only capacity matrices build this DAG

    @dag(**matrix_dag_settings(matrix, "capacity", _doc(matrix, source)))
    def capacity_search() -> None:
        previous, results = None, []
        for group, cell in cell_groups(matrix):
            timeout = search_timeout(spec, cell)
            searched = search.override(task_id=f"search_{group}", execution_timeout=timeout)(str(source), cell.id)
            if previous is not None:
                previous >> searched
            previous = searched
            results.append(searched)
        written = write_searches(results)
        planned_s = sum(_search_steps(spec, c) * cell_seconds(c, spec.step_s) for _, c in cell_groups(matrix))
        first, last = tail.analysis_tail(planned_s)
        written >> tables.override(execution_timeout=tail.tail_timeout(planned_s))() >> first
        last >> verdict(written)

    return capacity_search()


def search_timeout(spec: CapacitySpec, cell: Cell) -> timedelta:
    """A search task's execution timeout: the most steps its search can take (`max_search_steps`: the search
    ends there), each a whole cell measured for `capacity.step_s`."""
    return _search_steps(spec, cell) * cell_timeout(cell, spec.step_s)


def _search_steps(spec: CapacitySpec, cell: Cell) -> int:
    return max_search_steps(spec, [cell.spec.workload.rate_per_s])


@task(pool=POOL, retries=0)
def search(source: str, cell_id: str) -> dict[str, Any]:
    """One cell's whole search (`bench_tasks.capacity`), in-process; its result, already in the run's
    capacity.json (a run stopped in a later search keeps it)."""
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
    """Write the run's capacity.json and capacity.html once more from every search task's result before the
    analysis reads them (whatever the searches' outcome: a failed one is evidence too); what the verdict needs."""
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
