"""A pytest-xdist scheduler for the cell part of `make test` (`--beside-cells[=K]`): the last K workers (one by
default) run the files the `beside_cells` ini option lists, the others everything else, file by file as
`--dist loadfile` deals them; once every listed file is dealt, the last K take the other files as well (they had
idled 400-700 s of a 1,349 s part). (A list, not a marker: the scheduler sees node ids only.)

Why: the other workers take turns on the host lease, so the part lasts about half of what their modules take,
waits for the lease included, and modules that hold it little (the Celery deployment, the standalone Spark
cluster, the wheel's install into an Airflow of its own) took about 150 s of that. On workers of their own they
run beside the turns instead of in them. While another worker's cell holds the lease, such a worker and all it
started run idle, on CPU time the cells leave; while a cell of its own runs (the Celery DAG's, on its Airflow
project's lease), as normal (tests/cell_priority.py). Two of them: on one, the listed files ran one after another
past the end of the other workers' (the install alone took 509 s of a 1,046 s part, idle beside the cells).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling
from xdist.workermanage import WorkerController, parse_tx_spec_config

INI = "beside_cells"


class BesideCellsScheduling(LoadFileScheduling):
    """`--dist loadfile` with the files of `beside` reserved for the last `beside_workers` workers, which take
    the other files too once every listed one is dealt."""

    def __init__(self, config: pytest.Config, log: Producer, beside: Iterable[str], beside_workers: int = 1) -> None:
        super().__init__(config, log)
        self.beside = set(beside)
        self.beside_workers = beside_workers

    def _is_beside_worker(self, node: WorkerController) -> bool:
        return node.gateway.id in beside_worker_ids(self.numnodes, self.beside_workers)

    def _next_scope(self, node: WorkerController) -> str | None:
        if not any(self._is_beside_worker(n) for n in self.nodes):  # xdist stopped it: fewer files than workers
            return next(iter(self.workqueue), None)
        beside = self._is_beside_worker(node)
        scope = next((scope for scope in self.workqueue if (scope in self.beside) == beside), None)
        if scope is None and beside:  # every listed file dealt: it takes the others' files too
            return next(iter(self.workqueue), None)
        return scope

    def _assign_work_unit(self, node: WorkerController) -> None:
        """xdist's own assignment, of this node's next file moved to the front of the queue."""
        scope = self._next_scope(node)
        if scope is None:
            node.shutdown()
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)

    def _reschedule(self, node: WorkerController) -> None:
        if node.shutting_down:
            return
        if self._next_scope(node) is None:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        self._assign_work_unit(node)


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        "--beside-cells",
        nargs="?",
        type=int,
        const=1,
        default=0,
        metavar="K",
        help=f"with -n N (N > K) --dist loadfile: the last K workers (1 unless given) run only the files of the "
        f"{INI} ini option",
    )
    parser.addoption(
        "--give-way",
        action="store_true",
        help="every worker runs idle while a cell another session or worker took holds the host lease (a session "
        "run beside the cell part)",
    )
    parser.addini(
        INI, "test files (paths from the rootdir) that --beside-cells gives a worker of their own", "linelist"
    )


def is_beside_worker(config: pytest.Config) -> bool:
    """This process is one of the workers `BesideCellsScheduling` keeps for the listed files (the last ones
    started). A worker sees `--beside-cells` but not `--dist` (xdist gives its workers "no"), so this holds under
    any --dist."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    beside = int(config.getoption("beside_cells"))
    on = beside > 0 and count > beside
    return on and os.environ.get("PYTEST_XDIST_WORKER") in beside_worker_ids(count, beside)


def in_cell_part(config: pytest.Config) -> bool:
    """This process is a worker of a session given `--beside-cells` (the cell part of `make test`)."""
    return bool(config.getoption("beside_cells")) and "PYTEST_XDIST_WORKER" in os.environ


def gives_way(config: pytest.Config) -> bool:
    """This process runs tests that must give way to other workers' cells: a worker of the cell part, or a process
    of a session given `--give-way` (the part without cells, run beside the cell part)."""
    return in_cell_part(config) or bool(config.getoption("give_way"))


def beside_worker_ids(workers: int, beside: int) -> set[str]:
    """The last `beside` of `workers` started (xdist numbers them from gw0; a finished worker leaves the
    scheduler's nodes, so the scheduler counts the workers it was given)."""
    return {f"gw{i}" for i in range(max(workers - beside, 0), workers)}


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def make_scheduler(config: pytest.Config, log: Producer) -> BesideCellsScheduling | None:
    """pytest-xdist's `pytest_xdist_make_scheduler`: this scheduler when `--beside-cells` is given, else xdist's."""
    if not config.getoption("beside_cells") or config.getvalue("dist") != "loadfile":
        return None
    beside = int(config.getoption("beside_cells"))
    if len(parse_tx_spec_config(config)) <= beside:  # no worker would be left for the cell files
        return None
    return BesideCellsScheduling(config, log, config.getini(INI), beside)
