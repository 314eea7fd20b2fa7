"""One sweep DAG per matrix file: `sixnines_<matrix name>`, cells chained one at a time, then the analysis tail.

Built at parse time from the validated matrix only: no network, database or Variable access; the matrix's
`latest` versions, version overrides and phase scaling are resolved by each cell's provision task when it
runs. With `get_parsing_context()` naming a DAG (a task being run), only that DAG is built.

A matrix file that fails validation must not take the other matrices' DAGs with it. The DagBag validates each
DAG it collects and records a failing one as an import error of its file while keeping the file's other DAGs,
so the broken matrices become one placeholder whose validation raises the matrix errors (file and field).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, Param, TaskGroup, dag, get_current_context, task

from bench_tasks import (
    SYSTEMS,
    Cell,
    Matrix,
    expand_repeats,
    resolve_placement,
    scrub_text,
    system_of,
)

from . import cell_tasks, tail
from .runtime import POOL, clusters_for, lake_root, run_dir, run_info, standbys_for

log = logging.getLogger("sixnines")
APPROVED_TAGS = frozenset({"sixnines", "sweep", "compare", "capacity", *SYSTEMS})
START_DATE = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# Every task ends: one whose length nothing here predicts (a verdict, a comparison) within the hour; tasks that
# serve a cell or read a run's data get timeouts from its planned time instead (cell_tasks, tail).
DEFAULT_ARGS: dict[str, Any] = {
    "owner": "sixnines",
    "retries": 1,
    "retry_delay": dt.timedelta(seconds=30),
    "execution_timeout": dt.timedelta(hours=1),
}


def group_id(index: int, cell: Cell) -> str:
    """Stable at parse time (the cell id may change when `latest` or an override resolves): position in the
    matrix + shape, and `_rK` for repeat K of a repeated cell (every repeat of a cell shares its position)."""
    s = cell.spec
    setup = system_of(s).group_tag(s)
    setup = f"ext_{setup}" if s.brokers == "external" else setup
    repeat = f"_r{cell.repeat}" if cell.repeats > 1 else ""
    return f"c{index:02d}_{s.system}_{setup}_{s.measurement}{repeat}"


def cell_groups(matrix: Matrix) -> list[tuple[str, Cell]]:
    """Every TaskGroup of the sweep in run order (repeats in rounds, matrix.expand_repeats) with its cell."""
    position = {c.id: i for i, c in enumerate(matrix.cells, 1)}
    return [(group_id(position[c.id], c), c) for c in expand_repeats(matrix.cells)]


def matrix_dag_settings(matrix: Matrix, kind: str, doc: str) -> dict[str, Any]:
    """What every DAG built from a matrix shares (a sweep's or a capacity search's): id, schedule, one run at a
    time, tags naming its kind and systems."""
    systems = sorted({c.spec.system for c in matrix.cells})
    return {
        "dag_id": f"sixnines_{matrix.name}",
        "description": matrix.description or None,
        "schedule": matrix.schedule,
        "start_date": START_DATE,
        "catchup": False,
        "max_active_runs": 1,  # a benchmark sharing its host with another benchmark is worthless
        "auto_register": False,  # only DAGs that were built completely are published (through the file's globals)
        "tags": ["sixnines", kind, *systems],
        "default_args": DEFAULT_ARGS,
        "doc_md": doc,
    }


def build_sweep_dag(matrix: Matrix, source: Path) -> DAG:
    asset = Asset(name=f"sixnines_{matrix.name}_landed", uri=f"sixnines://lake/runs/{matrix.name}")

    @dag(**matrix_dag_settings(matrix, "sweep", _doc(matrix, source)), params=_params(matrix))
    def sweep() -> None:
        previous = None
        groups = cell_groups(matrix)
        for index, (group, cell) in enumerate(groups):
            previous = _cell_group(group, cell, previous, source, followed=index + 1 < len(groups))
        longest = max(cell_tasks.cell_timeout(c) for c in matrix.cells)  # a release stops what a teardown would
        released = release_brokers.override(execution_timeout=longest)()
        if previous is not None:
            previous >> released
        planned_s = sum(cell_tasks.cell_seconds(c) for _, c in groups)
        landed = tables.override(outlets=[asset], execution_timeout=tail.tail_timeout(planned_s))()
        first, last = tail.analysis_tail(planned_s)
        released >> landed >> first
        last >> verdict([group for group, _ in groups])

    return sweep()


def _cell_group(group: str, cell: Cell, previous: Any, source: Path, followed: bool) -> Any:
    """One cell's (repeat's) TaskGroup; returns its teardown, which the next cell's provision waits for.
    `followed`: another cell comes after this one (its land then starts a standby generator for it)."""
    w = cell.spec.workload
    repeat = f" (repeat {cell.repeat} of {cell.repeats})" if cell.repeats > 1 else ""
    bounded = cell_tasks.cell_timeout(cell)
    with TaskGroup(group_id=group, tooltip=cell.label + repeat):
        provisioned = cell_tasks.provision.override(execution_timeout=bounded + cell_tasks.RELEASE_FETCH)(
            cell.recorded(),
            str(source),  # its secrets redacted: provision reads them again from the matrix file
        )
        plan = resolve_placement(cell)  # where the cell runs: which hosts, on which workers' queues
        here = not plan.per_host and plan.generator_queue is None  # its generator runs on the land task's worker
        landed = cell_tasks.land.override(execution_timeout=bounded)(standby=followed and here)
        # a fresh copy: teardown decorators mutate
        stopped = cell_tasks.stop.override(task_id="teardown", execution_timeout=bounded)()
        if plan.per_host:  # one generator per real host, each on its host's worker, all at once
            timeout = cell_tasks.generate_timeout(cell)
            for host in plan.load_hosts:
                generate = cell_tasks.generate.override(
                    task_id=f"generate_{host}", queue=plan.queue_of(host), execution_timeout=timeout
                )(host)
                provisioned >> generate >> landed
        else:
            queue = {"queue": q} if (q := plan.generator_queue) else {}  # the load host's worker starts/watches it
            phases = [
                getattr(cell_tasks, name).override(execution_timeout=cell_tasks.phase_timeout(seconds), **queue)()
                for name, seconds in (("warmup", w.warmup_s), ("measure", w.measure_s), ("cooldown", w.cooldown_s))
            ]
            provisioned >> phases[0] >> phases[1] >> phases[2] >> landed
        landed >> stopped
        provisioned >> stopped
    if previous is not None:
        previous >> provisioned  # brokers of the previous cell are gone before these start
    return stopped


def _params(matrix: Matrix) -> dict[str, Param]:
    return {
        "reuse_published": Param(
            matrix.reuse_published,
            type="boolean",
            description="Skip a cell whose exact spec and release is already published (its tables stand for it): "
            "a backfill of a release history measures only the releases that are missing.",
        ),
        "versions": Param(
            {},
            type="object",
            additionalProperties={"type": "string"},
            propertyNames={"enum": sorted(SYSTEMS)},
            description='Override the version of a system in every cell: {"<system>": "<version>"}.',
        ),
        "phase_scale": Param(
            1.0,
            type="number",
            exclusiveMinimum=0,
            maximum=cell_tasks.MAX_PHASE_SCALE,
            description="Multiply warmup, measure and cooldown (0.2 for a quick smoke run). Changes the cell ids.",
        ),
        "cells": Param(
            [],
            type="array",
            items={"type": "string"},
            description="Run only these cells (TaskGroup ids such as c01_<system>_<tag>_e2e, or cell ids); empty: all.",
        ),
        "broker_policy": Param(
            "fresh",
            enum=["fresh", "reuse"],
            description="fresh: new brokers per cell. reuse: keep a cluster for the next cell with an identical "
            "broker spec (recorded in each cell's context as provisioning.reused).",
        ),
    }


def _doc(matrix: Matrix, source: Path) -> str:
    rows = "\n".join(f"| `{group}` | `{c.id}` | {c.label} |" for group, c in cell_groups(matrix))
    return (
        f"# sixnines sweep: {matrix.name}\n\n{matrix.description}\n\n"
        f"Cells run one at a time, each a TaskGroup provision → warmup → measure → cooldown → land → teardown; "
        f"the lake gets one row per cell under the run's logical date.\n\n"
        f"| group | cell id (before `latest` resolves) | cell |\n|---|---|---|\n{rows}\n\n"
        f"Matrix file `{source.name}`:\n\n```yaml\n{scrub_text(source.read_text())}```\n"
    )


@task(pool=POOL, retries=1, trigger_rule="all_done")
def release_brokers() -> list[int]:
    """Stop the clusters kept for reuse (policy `reuse`; nothing to do with policy `fresh`), and any standby
    generator no cell claimed."""
    from bench_tasks import release_clusters, stop_standbys

    context = get_current_context()
    return release_clusters(clusters_for(context)) + stop_standbys(standbys_for(context))


@task(retries=1, trigger_rule="all_done")
def tables() -> dict[str, Any]:
    """Print each landed cell's percentile tables (the generator's own, from its row) into the task log, and
    hand the run's identity to the analysis tail."""
    from rich.console import Console

    from bench_tasks import Lake, print_report, read_parquet, report_from_row

    run = run_info(get_current_context())
    lake = Lake(lake_root())
    path = lake.cells_path(run)
    rows = read_parquet(path).to_pylist() if path.exists() else []
    console = Console(width=120, force_terminal=False, no_color=True, record=True)
    for row in rows:
        repeat = row["repeat"] if (row.get("repeats") or 1) > 1 else None
        folder = lake.committed_cell_dir(run, row["cell_id"], repeat) or lake.cell_dir(run, row["cell_id"], repeat)
        print_report(report_from_row(row, folder), console)
    log.info("percentile tables of run %s:\n%s", run.run_id, console.export_text())
    log.info("cells: %s  raw: %s", path, lake.run_dir(run))
    return {
        "run_id": run.run_id,
        "run_date": run.run_date,
        "lake": str(lake.root),
        "cells_path": str(path),
        "cells": len(rows),
        "messages": sum(r["sent"] or 0 for r in rows),  # measure-phase sends: how the analysis is launched
        "failed": sorted({r["cell_id"] for r in rows if r["status"] != "ok"}),
    }


@task(retries=0, trigger_rule="all_done")
def verdict(groups: list[str]) -> dict[str, Any]:
    """Fail the run unless every selected cell landed ok, so a bad night is never green (the run's state
    follows this last task; teardowns and the tail do not decide it). The run's work folder in the cache goes
    once judged, unless kept on purpose (SIXNINES_KEEP_WORK=1) or something in it was not torn down."""
    from airflow.sdk.exceptions import AirflowFailException

    from bench_tasks import discard_run_work, run_verdict

    context = get_current_context()
    base, run = run_dir(context), run_info(context)
    outcome, problems = run_verdict(base, groups, lake_root(), run.run_date, run.run_id)
    log.info("work folder of the run: %s", discard_run_work(base))
    if problems:
        raise AirflowFailException(f"the run failed ({len(groups)} cell(s)): " + "; ".join(problems))
    log.info("cells: %s", outcome)
    return outcome
