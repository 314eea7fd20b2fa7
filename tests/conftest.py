"""Shared fixtures. Integration tests start their own real brokers and must leave no process behind."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from multiprocessing import forkserver, resource_tracker
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from bench_tasks.brokers.patience import PATIENCE_ENV
from bench_tasks.cell.hostlease import lease_path, live_holder, release_host
from bench_tasks.cell.workerctx import worker_context
from tests import beside_cells, cell_priority
from tests.host_turns import host_turn, on_a_lease_of_its_own
from tests.lease_usage import LeaseClockPerTest, LeaseUsage, read_lease, top_holders
from tests.worker_timeline import WorkerTimeline

_LEASE_USAGE = pytest.StashKey[LeaseUsage]()
_TEST_CLOCK = pytest.StashKey[LeaseClockPerTest]()
_HELD_BY_TEST = pytest.StashKey[dict[str, float]]()
_TIMELINE = pytest.StashKey[WorkerTimeline]()
_COLLECTED = pytest.StashKey[set[str]]()
COLLECTED_ENV = "SIXNINES_TEST_COLLECTED"

REPO = Path(__file__).resolve().parent.parent

# Every Spark driver the suite starts (sessions of the Spark tests, spark-submit from Airflow's tail and the CLI)
# analyses a few thousand rows and exits: compiled by the JIT's first tier only, a test's analysis took 18.7 s
# instead of 22.4 s and 24 s of CPU instead of 37 s (spark_jobs/pipeline.py on two synthetic cells, 3 runs each).
# The tables are the same; the benchmark's own analysis (`make bench`, Airflow) keeps the full JIT. Brokers'
# JVMs are not Spark's and never read this. With the first tier alone the JVM reserves 48 MiB for compiled code
# (240 MiB with both), and a Spark test worker's one session, compiling every test's generated code, filled that
# in a clean-clone run (30,167 methods after 119 s): its compiler stopped, then a task failed for want of room for
# a method-handle stub. So the reservation stays at the two tiers' size (address space; pages as used).
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m")
# Where cell tests run in two workers (`make test`'s default), their cells take turns on the host lease: a
# waiting cell asks again every 0.2 s (CLI) instead of 5 s, and a waiting Airflow provision is rescheduled as
# soon, instead of in 15 s, so the host is not left idle between two tests' cells.
os.environ.setdefault("SIXNINES_HOST_POLL_S", "0.2")
# The suite's workers run idle while another worker's cell holds the host (85 % of a clean-clone run), so a broker
# one of them starts gets only the CPU time the cell leaves: Kafka nodes ready in 2-7 s alone were still starting
# after 90-120 s in such runs. Every deadline for a broker getting ready is four times a quiet host's (Kafka 360 s).
os.environ.setdefault(PATIENCE_ENV, "4")


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Broker state and run folders go to a per-session cache; fetched broker releases are shared with
    the developer's `.cache/` (they are verified before use) so a second run does not download again."""
    os.environ.setdefault("SIXNINES_CACHE", str(REPO / ".cache"))
    yield


@pytest.fixture(scope="session", autouse=True)
def _cell_part_gives_way(request: pytest.FixtureRequest, _isolated_cache: None) -> bool:
    """Each worker of the cell part runs idle while another worker's cell holds the host (tests/cell_priority.py),
    until it exits: what it does between its own cells (brokers, servers, Airflow, Spark) waits on that cell. So
    does each worker of a session run beside the cell part (`--give-way`): it has no cells of its own. A worker
    that gives way keeps its analyses off other workers' cells by that alone, so its analyses (local Spark, in
    tests or in Airflow's tasks it starts) leave the lease to cells: they held it 167 s of a cell part of 1087 s.
    For the same reason a cell gives the lease back once its generator has stopped, before it lands and its
    brokers stop. It holds it while they start: a 3-node Kafka cluster starting and stopping in an idle group
    beside a Java chain cell took its threads' wait for a CPU from 7-10 % of the measure phase to 14-19 %."""
    if beside_cells.gives_way(request.config) and cell_priority.give_way(lease_path()) is not None:
        os.environ["SIXNINES_ANALYSIS_HOLDS_HOST"] = "0"
        os.environ["SIXNINES_TEARDOWN_HOLDS_HOST"] = "0"
        return True
    return False


@pytest.fixture(scope="module", autouse=True)
def _host_turn(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, _cell_part_gives_way: bool
) -> Iterator[None]:
    """In parallel workers, a module marked `host_alone` (fault and capacity timings, network namespaces) has the
    host to itself. Where the other workers give way to cells (`make test`'s cell part), it holds the suite's host
    lease from its first fixture to its last test, as one long cell would, and its own cells take turns on a lease
    of their own: every other worker's cells wait, and everything else they do runs idle (tests/cell_priority.py).
    Elsewhere (`pytest -n 2 -m serial` on a host without idle groups) it waits until the other workers' modules
    have ended, and theirs wait for it (tests/host_turns.py): that idles workers, which `make test` then avoids by
    running these modules last, one at a time. Module-wide, so that module fixtures (brokers, namespaces) are
    inside the turn too."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    alone = request.node.get_closest_marker("host_alone") is not None
    if alone and _cell_part_gives_way:
        with on_a_lease_of_its_own(tmp_path_factory.mktemp("host-alone")):
            yield
        return
    shared_by_workers = tmp_path_factory.getbasetemp().parent / "host-turns"
    with host_turn(shared_by_workers, alone=alone):
        yield


@pytest.fixture(autouse=True)
def _no_lease_left_held() -> Iterator[None]:
    """A test whose cell failed before its teardown leaves the host lease held by the test's own process, which
    lives on: every later cell of every worker then waits for it until its test times out (a clean-clone run's
    cell part hung so: its tests failed at their 300 s and 600 s timeouts). The cell is torn down here, which
    gives the lease back, and the test errors. A lease the next cell would take over (a provision that failed
    before any broker was recorded) is left alone. Whose the lease is, is read first without its lock: another
    worker's cell holding it is the common case, and is not asked whether it is stale after every test."""
    yield
    if _taker_pid(read_lease(lease_path())) != os.getpid():
        return
    holder = live_holder()
    if holder is None or "work" not in holder or _taker_pid(holder) != os.getpid():
        return
    from bench_tasks.cell.teardown import teardown_step
    from bench_tasks.cell.work import CellWork

    work = CellWork(Path(holder["work"]))
    with contextlib.suppress(Exception):  # whatever the teardown says, the lease goes
        teardown_step(work, keep_reused=False)
    release_host(work)
    pytest.fail(f"the test left its cell holding the host lease ({holder['work']}): torn down")


def _taker_pid(holder: dict[str, Any] | None) -> int | None:
    return ((holder or {}).get("taker") or {}).get("pid")


@pytest.fixture
def console() -> Console:
    return Console(width=120, force_terminal=False, no_color=True)


@pytest.fixture
def no_orphans() -> Iterator[None]:
    """Fail the test if it leaves any child process (broker or generator worker) running."""
    resource_tracker.ensure_running()  # multiprocessing's own helper: lives as long as this interpreter
    server = _fork_server()  # the cells' workers fork from it: it lives on, but none of its children may
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)} - {server}
    yield
    left = []
    for proc in me.children(recursive=True):
        if proc.pid in before or proc.pid == server or _started_by_an_earlier_process(proc, before):
            continue
        try:
            proc.wait(timeout=5)  # a worker that is just exiting gets a moment
            continue
        except psutil.TimeoutExpired:
            pass
        except psutil.NoSuchProcess:
            continue
        with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie its (listed) parent has not reaped
            left.append(f"{proc.pid} {' '.join(proc.cmdline())[:80]}")
    assert not left, f"processes left behind: {left}"


def _fork_server() -> int | None:
    """The pid of the fork server the cells' workers come from (bench_tasks.cell.workers), started now with its
    preloads if it is not running yet, so that the first test to run a cell does not see it as left behind."""
    worker_context()
    forkserver.ensure_running()
    return forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]


def _started_by_an_earlier_process(proc: psutil.Process, before: set[int]) -> bool:
    """A child of a process that was running before the test (a session's Spark JVM forking its pooled Python
    workers, a module's broker) is that process's to manage: its owner's fixture stops it, and this check then."""
    with contextlib.suppress(psutil.NoSuchProcess):
        return any(parent.pid in before for parent in proc.parents())
    return False


def pytest_addoption(parser: pytest.Parser) -> None:
    beside_cells.add_option(parser)


pytest_xdist_make_scheduler = beside_cells.make_scheduler  # `--beside-cells` (tests/beside_cells.py)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that runs cells (under tests/integration, or marked integration) is `serial`: `make test` runs those
    in two workers (and a third for the files beside them, tests/beside_cells.py), after the rest ran in three. A cell
    sharing two cores with a Spark job or another cell is starved, and the harness rightly fails it as saturated
    (seen: 13 such failures at three workers beside other work). In two workers their cells take turns on the host
    lease, and a local analysis of either worker holds the host as well (spark_jobs.pipeline.host_held). Modules
    marked `host_alone` (fault and capacity timings, network namespaces) hold the host for the whole module
    (`_host_turn`). A module marked `alongside` starts brokers
    but runs no cell and gates no latency: it runs with the parallel part, where its waits for nodes to boot overlap
    other tests."""
    for item in items:
        if item.get_closest_marker("alongside"):
            continue
        if item.nodeid.startswith("tests/integration/") or item.get_closest_marker("integration"):
            item.add_marker(pytest.mark.serial)


def pytest_sessionstart(session: pytest.Session) -> None:
    """In the session's controller, watch how long the host lease is held; in each process that runs tests, how
    long each test's own cells and analyses held it (tests/lease_usage.py)."""
    config = session.config
    config.stash[_HELD_BY_TEST] = {}
    worker = hasattr(config, "workerinput")
    if not worker:
        config.stash[_LEASE_USAGE] = LeaseUsage(lease_path()).start()
    if not worker and config.pluginmanager.hasplugin("dsession"):
        config.stash[_TIMELINE] = WorkerTimeline()
        config.pluginmanager.register(config.stash[_TIMELINE], "worker-timeline")
    if worker or not config.pluginmanager.hasplugin("dsession"):  # xdist's controller runs no test
        config.stash[_TEST_CLOCK] = LeaseClockPerTest(lease_path()).start()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    clock = item.config.stash.get(_TEST_CLOCK, None)
    if clock is not None:
        clock.current = item.nodeid
    try:
        return (yield)
    finally:
        if clock is not None:
            clock.current = None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    """xdist's controller: once every worker has collected, touch the file `SIXNINES_TEST_COLLECTED` names (if
    set): `make test` starts its parallel part then, so that collection does not delay the cell part's first cells."""
    flag = os.environ.get(COLLECTED_ENV)
    collected = node.config.stash.setdefault(_COLLECTED, set())
    collected.add(node.gateway.id)
    if flag and len(collected) >= node.config.getoption("numprocesses"):
        Path(flag).touch()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: a worker's per-test lease times (sent in its `workeroutput`)."""
    node.config.stash[_HELD_BY_TEST].update(node.workeroutput.get("lease_by_test", {}))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    usage = config.stash.get(_LEASE_USAGE, None)
    if usage is not None and (usage.cells or usage.analyses_s):
        terminalreporter.write_line(usage.line())
    clock = config.stash.get(_TEST_CLOCK, None)
    held = {**config.stash.get(_HELD_BY_TEST, {}), **(clock.stop() if clock is not None else {})}
    if any(held.values()):
        terminalreporter.write_line("tests whose own cells and analyses held the host lease longest:")
        for line in top_holders(held):
            terminalreporter.write_line(line)
    timeline = config.stash.get(_TIMELINE, None)
    if timeline is not None and timeline.files:
        terminalreporter.write_line("when each worker ran tests (seconds from the session's start):")
        for line in timeline.lines():
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Quiet py4j before the interpreter exits: an in-process SparkSession's gateway is closed by the garbage
    collector after pytest has closed the stream Airflow's logging writes to, and its "Closing down clientserver
    connection" line (or, in a parallel worker, an error of the connection the dying JVM reset) then printed a
    `--- Logging error ---` traceback under a passing run. The tests are over: a logging call that fails now is
    dropped, as `logging.raiseExceptions` is meant to be off outside development."""
    clock = session.config.stash.get(_TEST_CLOCK, None)
    if clock is not None and hasattr(session.config, "workeroutput"):  # an xdist worker: to the controller
        session.config.workeroutput["lease_by_test"] = clock.stop()
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    logging.raiseExceptions = False
