"""DAG integrity: every matrix file yields its sweep DAG, shaped the way the issue and DESIGN.md say."""

from __future__ import annotations

import itertools
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_tasks.spec.matrix import load_matrix
from bench_tasks.systems import SYSTEMS
from bench_tasks.topology.plan import resolve_placement

REPO = Path(__file__).resolve().parents[2]
MATRICES = sorted((REPO / "matrices").glob("*.yaml"))
SWEEPS = [p for p in MATRICES if load_matrix(p).capacity is None]  # the others are capacity searches
SEARCHES = [p for p in MATRICES if p not in SWEEPS]
APPROVED_TAGS = {"sixnines", "sweep", "compare", "capacity", *SYSTEMS}  # tagged with its matrix's systems too
CELL_TASKS = ("provision", "warmup", "measure", "cooldown", "land", "teardown")


def sweep(dagbag: Any, path: Path) -> Any:
    dag = dagbag.dags.get(f"sixnines_{load_matrix(path).name}")
    assert dag is not None, f"{path.name} yields no DAG; DAGs: {sorted(dagbag.dags)}"
    return dag


def groups(dag: Any) -> list[str]:
    return sorted({t.task_id.rsplit(".", 1)[0] for t in dag.tasks if "." in t.task_id})


def test_no_import_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}


def test_every_matrix_and_the_comparison_are_dags(dagbag: Any) -> None:
    expected = {f"sixnines_{load_matrix(p).name}" for p in MATRICES} | {"sixnines_compare_versions"}
    assert set(dagbag.dags) == expected


def test_tags_retries_and_run_policy(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        assert dag.tags and set(dag.tags) <= APPROVED_TAGS, dag.dag_id
        assert dag.catchup is False and dag.max_active_runs == 1, dag.dag_id
        assert dag.doc_md, dag.dag_id
        for task in dag.tasks:
            assert isinstance(task.retries, int) and task.retries >= 0, task.task_id


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_sweep_follows_the_matrix(dagbag: Any, path: Path) -> None:
    matrix, dag = load_matrix(path), sweep(dagbag, path)
    assert dag.timetable.expression == matrix.schedule
    assert len(groups(dag)) == sum(c.repeats for c in matrix.cells)
    assert path.read_text() in dag.doc_md
    assert set(dag.params) == {"versions", "phase_scale", "cells", "broker_policy", "reuse_published"}
    assert dag.params["reuse_published"] is matrix.reuse_published


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_each_cell_is_a_group_with_setup_and_teardown(dagbag: Any, path: Path) -> None:
    dag = sweep(dagbag, path)
    for group in groups(dag):
        if f"{group}.warmup" not in dag.task_dict:  # load on real hosts: generate_<host> (test_host_queues)
            assert {t.task_id for t in dag.tasks if t.task_id.startswith(f"{group}.generate_")}
            continue
        tasks = {name: dag.get_task(f"{group}.{name}") for name in CELL_TASKS}
        assert tasks["provision"].is_setup and tasks["teardown"].is_teardown
        chain = [tasks[n] for n in CELL_TASKS]
        for upstream, downstream in itertools.pairwise(chain):
            assert upstream.task_id in downstream.upstream_task_ids
        assert tasks["provision"].task_id in tasks["teardown"].upstream_task_ids
        assert tasks["land"].trigger_rule == "all_done"  # a failed cell still lands
        assert {t.pool for t in chain} == {"sixnines_bench"}
        assert {t.retries for t in chain[1:4]} == {0}  # a passed schedule cannot be watched again


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_cells_are_chained_one_at_a_time(dagbag: Any, path: Path) -> None:
    from sixnines_airflow.sweep import cell_groups

    dag = sweep(dagbag, path)
    names = [group for group, _ in cell_groups(load_matrix(path))]  # run order: repeats in rounds
    assert sorted(names) == groups(dag)
    for previous, current in itertools.pairwise(names):
        provision = dag.get_task(f"{current}.provision")
        assert provision.upstream_task_ids == {f"{previous}.teardown"}
        assert provision.trigger_rule == "all_done"  # a failed cell never stops the sweep
    last = dag.get_task("release_brokers")
    assert last.upstream_task_ids == {f"{names[-1]}.teardown"}
    # a cell's land starts a standby generator for the next cell when its own generator ran on the land's worker
    assert dag.get_task(f"{names[-1]}.land").op_kwargs == {"standby": False}
    for name, cell in cell_groups(load_matrix(path))[:-1]:
        plan = resolve_placement(cell)  # provision claims a standby only where it would hold a generator itself
        here = not plan.per_host and plan.generator_queue is None
        assert dag.get_task(f"{name}.land").op_kwargs == {"standby": here}, name
    assert [t.task_id for t in dag.leaves] == ["verdict"]
    assert dag.get_task("tables").outlets


def test_compare_versions_dag(dagbag: Any) -> None:
    dag = dagbag.dags["sixnines_compare_versions"]
    assert set(dag.params) == {"system", "versions", "matrix", "phase_scale"}
    run = dag.get_task("run_version")
    assert run.pool == "sixnines_bench" and run.max_active_tis_per_dag == 1
    assert "run_version" in dag.get_task("compare").upstream_task_ids


def test_broken_matrix_is_an_import_error_naming_file_and_field(tmp_path: Path, monkeypatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "dags").mkdir()
    (tmp_path / "matrices").mkdir()
    shutil.copy(REPO / "dags" / "sixnines.py", tmp_path / "dags")
    monkeypatch.setenv("SIXNINES_MATRICES", str(tmp_path / "matrices"))
    shutil.copy(REPO / "matrices" / "quick.yaml", tmp_path / "matrices" / "quick.yaml")
    raw = yaml.safe_load((REPO / "matrices" / "quick.yaml").read_text())
    raw["name"], raw["workload"]["rate_per_s"] = "broken", -5
    (tmp_path / "matrices" / "broken.yaml").write_text(yaml.safe_dump(raw))
    bag = DagBag(dag_folder=str(tmp_path / "dags"))
    assert set(bag.dags) == {"sixnines_quick", "sixnines_compare_versions"}  # the good matrix still loads
    (error,) = bag.import_errors.values()
    assert "broken.yaml" in error and "workload.rate_per_s" in error and "-5" in error


@pytest.mark.parametrize("path", SEARCHES, ids=lambda p: p.name)
def test_a_capacity_matrix_searches_each_cell_one_at_a_time(dagbag: Any, path: Path) -> None:
    matrix, dag = load_matrix(path), sweep(dagbag, path)
    searches = [t for t in dag.tasks if t.task_id.startswith("search_")]
    assert len(searches) == len(matrix.cells) and {t.pool for t in searches} == {"sixnines_bench"}
    for upstream, downstream in itertools.pairwise(sorted(searches, key=lambda t: t.task_id)):
        assert upstream.task_id in downstream.upstream_task_ids  # never two searches at once
    written, verdict = dag.get_task("write_searches"), dag.get_task("verdict")
    assert {t.task_id for t in searches} <= written.upstream_task_ids and written.trigger_rule == "all_done"
    assert "tables" in written.downstream_task_ids  # capacity.json exists before the analysis reads it
    assert verdict.trigger_rule == "all_done" and not verdict.downstream_task_ids  # the run's state
    assert {"report", "write_searches"} <= verdict.upstream_task_ids
    # published capacities join the history: the run is checked (and alerts notified) like a sweep
    assert "regressions" in dag.get_task("analysis").downstream_task_ids


def test_every_task_has_an_execution_timeout(dagbag: Any) -> None:
    """A task that hangs holds the host, the benchmark pool and the run: every one ends by a timeout."""
    for dag in dagbag.dags.values():
        unbounded = [t.task_id for t in dag.tasks if t.execution_timeout is None]
        assert not unbounded, f"{dag.dag_id}: no execution_timeout on {unbounded}"


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_a_cells_tasks_time_out_by_its_planned_time(dagbag: Any, path: Path) -> None:
    """Land and teardown get the cell's whole planned time (at the longest phase scale) to finish, and no more
    than that plus start-up; provision that, and the time to fetch a release."""
    from sixnines_airflow.cell_tasks import MAX_PHASE_SCALE, RELEASE_FETCH
    from sixnines_airflow.sweep import cell_groups

    dag = sweep(dagbag, path)
    for group, cell in cell_groups(load_matrix(path)):
        w = cell.spec.workload
        planned = (
            w.warmup_s + w.measure_s + w.cooldown_s + w.drain_timeout_s + SYSTEMS[cell.spec.system].setup_estimate_s
        )
        for name, extra in (("provision", RELEASE_FETCH), ("land", timedelta(0)), ("teardown", timedelta(0))):
            limit = dag.get_task(f"{group}.{name}").execution_timeout
            assert limit is not None, f"{group}.{name}"
            seconds = (limit - extra).total_seconds()
            assert planned * MAX_PHASE_SCALE <= seconds <= planned * MAX_PHASE_SCALE + 600, name


@pytest.mark.parametrize("path", SEARCHES, ids=lambda p: p.name)
def test_a_search_task_has_time_for_its_most_steps(dagbag: Any, path: Path) -> None:
    """A search ends within `max_search_steps` steps, each a whole cell: its task's timeout allows that many
    cells measured for `step_s`, and is not unbounded."""
    from sixnines_airflow.sweep import cell_groups

    from bench_tasks.capacity.search import max_search_steps

    matrix, dag = load_matrix(path), sweep(dagbag, path)
    assert matrix.capacity is not None
    for group, cell in cell_groups(matrix):
        w = cell.spec.workload
        steps = max_search_steps(matrix.capacity, [w.rate_per_s])
        step_s = w.warmup_s + (matrix.capacity.step_s or w.measure_s) + w.cooldown_s + w.drain_timeout_s
        limit = dag.get_task(f"search_{group}").execution_timeout
        assert limit is not None and steps * step_s < limit.total_seconds() < float("inf")
