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
