"""Load-generator hosts in the sweep DAG: the tasks that start and watch a cell's generator run on the queue of
its load host; the broker's tasks (provision, land, teardown) and the analysis tail stay on `default`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GENERATOR_TASKS = ("warmup", "measure", "cooldown")


def test_generator_tasks_run_on_the_load_hosts_queue(dagbag: Any) -> None:
    dag = dagbag.dags["sixnines_netns_hosts"]
    cell_tasks = [t for t in dag.tasks if "." in t.task_id]
    assert cell_tasks
    for task in cell_tasks:
        wanted = "loadgen_1" if task.task_id.rsplit(".", 1)[1] in GENERATOR_TASKS else "default"
        assert task.queue == wanted, task.task_id
    assert all(t.queue == "default" for t in dag.tasks if "." not in t.task_id)  # release, tables, tail


def test_matrices_without_hosts_keep_every_task_on_default(dagbag: Any) -> None:
    dag = dagbag.dags["sixnines_quick"]
    assert {t.queue for t in dag.tasks} == {"default"}


def test_real_hosts_get_one_generate_task_each_on_their_queue(dagbag: Any) -> None:
    """matrices/loadgen_hosts.yaml: every cell has generate_<host> per load host, on that host's queue, all
    between provision and land so they run at the same time; nothing else leaves `default`."""
    dag = dagbag.dags["sixnines_loadgen_hosts"]
    groups = sorted({t.task_id.split(".", 1)[0] for t in dag.tasks if "." in t.task_id})
    assert len(groups) == 3
    for group in groups:
        names = {t.task_id.split(".", 1)[1]: t for t in dag.tasks if t.task_id.startswith(group + ".")}
        assert set(names) == {"provision", "generate_loadgen1", "generate_loadgen2", "land", "teardown"}
        for host, queue in (("loadgen1", "loadgen_1"), ("loadgen2", "loadgen_2")):
            generate = names[f"generate_{host}"]
            assert generate.queue == queue
            assert generate.pool != "sixnines_bench"  # one-slot pool would serialise the hosts into a timeout
            assert generate.upstream_task_ids == {f"{group}.provision"}
            assert generate.downstream_task_ids == {f"{group}.land"}
        assert {names[n].queue for n in ("provision", "land", "teardown")} == {"default"}
        assert names["provision"].is_setup and names["teardown"].is_teardown
        assert names["land"].trigger_rule == "all_done"  # a host that failed still has its samples landed
