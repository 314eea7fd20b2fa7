"""The host lease: cells never overlap on a host, whichever DAG or run they belong to. `provision_step` takes the
lease (`host.lease` in the cache) before starting anything and teardown gives it back (with
`SIXNINES_TEARDOWN_HOLDS_HOST=0`, once its generator has stopped); a lease whose cell was
torn down, or whose processes are all gone, is stale and taken over. A local analysis holds the host too
(`host_for_analysis`), shared with other analyses, so no Spark job runs beside a cell."""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..brokers.handles import PidNodes
from ..brokers.provision import attach
from ..errors import SixninesError
from ..lake.layout import write_json
from ..paths import cache_dir
from ..systems import UnknownSystem
from .detached import generator_alive, process_alive, topology_of
from .work import CellWork

HOST_POLL_ENV = "SIXNINES_HOST_POLL_S"
HOST_LEASE_ENV = "SIXNINES_HOST_LEASE"
# "0": analyses leave the lease alone, where something else keeps them off measuring cells (the test suite's
# workers run in cgroups that give way to every cell: tests/cell_priority.py). Empty or "1": they hold it.
ANALYSIS_HOLDS_ENV = "SIXNINES_ANALYSIS_HOLDS_HOST"
# "0": a cell gives the host back once its generator has stopped, where something else keeps its landing and its
# brokers' stop off the next cell's measurement (the test suite's workers, again): those measure nothing, and run
# beside the next cell's start and warmup. Its brokers' start stays on the lease: started beside a measuring cell,
# even from an idle group, they disturbed it. Empty or "1": it holds the host until teardown.
TEARDOWN_HOLDS_ENV = "SIXNINES_TEARDOWN_HOLDS_HOST"


class HostBusy(SixninesError):
    """Another cell holds the host: starting brokers or load now would overlap two benchmarks."""


def lease_path() -> Path:
    """The host lease: the file `SIXNINES_HOST_LEASE` names when set and not empty, else `host.lease` in the cache.
    A lease is the host's, not a cache's: projects with caches of their own on one host (two Airflow deployments, a
    checkout beside a deployment) that name one file take turns with each other's cells as with their own."""
    raw = os.environ.get(HOST_LEASE_ENV, "").strip()
    if not raw:
        return cache_dir() / "host.lease"
    path = Path(raw).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def acquire_host(work: CellWork) -> None:
    """Take the host for this cell, or raise HostBusy naming the cell that has it. The lease names the process
    that took it (PID and start time): until the cell's brokers are recorded, that process running is what
    keeps the lease alive."""
    with _lease_lock():
        holder = _lease_holder()
        if holder is not None and holder.get("work") != str(work.root) and not _lease_stale(holder):
            raise HostBusy(_busy_with(holder))
        write_json(
            lease_path(), {"work": str(work.root), "cell": work.root.name, "since": now_iso(), "taker": _taker()}
        )


def host_poll_s(default: float) -> float:
    """How often a cell waiting for the host asks again: `SIXNINES_HOST_POLL_S` when set and not empty (as
    docker-compose passes an unset one), else `default`. A sweep's cells hold the host for minutes, so every few
    seconds is soon enough; a test suite whose cell tests run in two workers wants the host back within a
    fraction of a second of its release."""
    raw = os.environ.get(HOST_POLL_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise SixninesError(f"{HOST_POLL_ENV}={raw!r}: expected seconds above 0 and at most 3600")
    return value


@contextlib.contextmanager
def host_idle(poll_s: float = 5.0, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the lease's lock while no cell holds the host: no cell runs, and none can start (taking the host
    waits on this lock) until the block ends. For work that must not meet a cell half-built (`netns-clean`)."""
    told = False
    while True:
        with _lease_lock():
            holder = _lease_holder()
            if holder is None or _lease_stale(holder):
                yield
                return
        if on_wait is not None and not told:
            on_wait(_busy_with(holder))
            told = True
        time.sleep(host_poll_s(poll_s))


def live_holder() -> dict[str, Any] | None:
    """The lease's record while a cell or analysis holds the host; None when it is free, or held by one that
    `acquire_host` would take over (stale)."""
    with _lease_lock():
        holder = _lease_holder()
        return None if holder is None or _lease_stale(holder) else holder


def release_host(work: CellWork) -> None:
    """Give the host back if this cell holds it."""
    with _lease_lock():
        holder = _lease_holder()
        if holder is not None and holder.get("work") == str(work.root):
            lease_path().unlink()


def leave_host_once_loaded(work: CellWork, state: dict[str, Any]) -> None:
    """With `SIXNINES_TEARDOWN_HOLDS_HOST=0`, give the host back once the cell's generator has stopped (`land` and
    teardown call it). A cell with network namespaces keeps it until teardown has removed them (`netns-clean`
    takes a host no cell holds to mean that none is being built)."""
    if not teardown_holds_host() and topology_of(state) is None:
        release_host(work)


@contextlib.contextmanager
def host_for_analysis(run_id: str, poll_s: float = 5.0, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Keep cells off this host while an analysis runs on it (local Spark): Spark on the cells' cores would slow
    their brokers, and that latency would land in the tables as the broker's own. Analyses share the host with
    one another (they measure nothing); a cell waits until every one has ended, and an analysis waits for the
    cell holding the host (asking again every `host_poll_s(poll_s)` seconds, telling `on_wait` once why) unless
    this process or one that started it took that cell's lease: a test or `dags test` analysing beside its own
    cell would otherwise wait for itself. `SIXNINES_ANALYSIS_HOLDS_HOST=0`: nothing is held."""
    if not analysis_holds_host():
        yield
        return
    entry: dict[str, Any] | None = {"run": run_id, "since": now_iso(), "taker": _taker(), "id": os.urandom(6).hex()}
    told = False
    while True:
        with _lease_lock():
            holder = _lease_holder()
            if holder is None or "analyses" in holder or _lease_stale(holder):
                running = [a for a in (holder or {}).get("analyses", []) if process_alive(a["taker"])]
                write_json(lease_path(), {"analyses": [*running, entry]})
                break
            if _taken_by_this_process_tree(holder):
                entry = None
                break
        if on_wait is not None and not told:
            on_wait(_busy_with(holder))
            told = True
        time.sleep(host_poll_s(poll_s))
    try:
        yield
    finally:
        if entry is not None:
            _leave_analyses(entry)


def analysis_holds_host() -> bool:
    """Whether an analysis takes the host lease (`SIXNINES_ANALYSIS_HOLDS_HOST`: "1" or empty, the default, or
    "0")."""
    return _switched_on(ANALYSIS_HOLDS_ENV)


def teardown_holds_host() -> bool:
    """Whether a cell holds the host until its teardown (`SIXNINES_TEARDOWN_HOLDS_HOST`: "1" or empty, the default,
    or "0": until its generator has stopped)."""
    return _switched_on(TEARDOWN_HOLDS_ENV)


def _switched_on(name: str) -> bool:
    """A switch that is on unless the environment sets it to "0"."""
    raw = os.environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise SixninesError(f"{name}={raw!r}: expected 0 or 1")
    return raw != "0"


def _leave_analyses(entry: dict[str, Any]) -> None:
    """Take `entry` (and any analysis whose process is gone) off the lease; the last one out frees the host."""
    with _lease_lock():
        holder = _lease_holder()
        if holder is None or "analyses" not in holder:
            return
        running = [a for a in holder["analyses"] if a != entry and process_alive(a["taker"])]
        if running:
            write_json(lease_path(), {"analyses": running})
        else:
            lease_path().unlink()


def _taken_by_this_process_tree(holder: dict[str, Any]) -> bool:
    """The cell's lease was taken by this process or one of its ancestors, and that process still runs."""
    import psutil

    taker = holder.get("taker")
    if taker is None:
        return False
    tree = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    return int(taker["pid"]) in tree and process_alive(taker)


@contextlib.contextmanager
def _lease_lock() -> Iterator[None]:
    """flock around reading and writing the lease, so two provisions cannot both take a free host."""
    with open(lease_path().with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _busy_with(holder: dict[str, Any]) -> str:
    if "analyses" in holder:
        runs = ", ".join(f"{a['run']} (since {a['since']})" for a in holder["analyses"])
        return f"the host is busy with the analysis of run {runs}"
    return f"the host is busy with cell {holder['cell']} ({holder['work']}, since {holder['since']})"


def _taker() -> dict[str, Any]:
    """This process, as a lease records it: PID and start time (a recycled PID is another process)."""
    return {"pid": os.getpid(), "create_time": _started_at(os.getpid())}


def _lease_holder() -> dict[str, Any] | None:
    try:
        return json.loads(lease_path().read_text())
    except (FileNotFoundError, ValueError):
        return None


def _lease_stale(holder: dict[str, Any]) -> bool:
    """The holder was torn down, never provisioned, or none of its processes runs any more. While it provisions
    (no brokers recorded yet, no failure either), the process that took the lease is what runs: a broker taking
    seconds to start must not leave the host to the next cell. Analyses hold it while any of theirs runs."""
    if "analyses" in holder:
        return not any(process_alive(a["taker"]) for a in holder["analyses"])
    work = CellWork(Path(holder["work"]))
    if (work.root / "teardown.json").exists():
        return True
    state = work.read(work.state)
    if state is None or (state.get("brokers") is None and not state.get("failure")):
        return _taker_gone(holder)
    known = work.read(work.generator)
    if known is not None and generator_alive(work, known):
        return False
    brokers = state.get("brokers")
    if not brokers:
        return True
    if brokers.get("kind") == "external":  # no node is the cell's process: between provision and load (and after
        return _taker_gone(holder)  # it), the process that took the lease running is what keeps the host
    try:
        return not any(attach(brokers).alive().values())
    except UnknownSystem:  # a system another checkout sharing the cache knows: its nodes are asked by PID alone
        nodes = {int(k): int(v) for k, v in (brokers.get("nodes") or {}).items()}
        return not any(PidNodes(nodes, brokers.get("process_name") or "?").alive().values())
    except ValidationError:  # an external cell of a system this checkout lacks: its spec is unreadable here, and
        return False  # it may well be running


def _taker_gone(holder: dict[str, Any]) -> bool:
    """The process that took the lease has ended (or none was recorded)."""
    taker = holder.get("taker")
    return taker is None or not process_alive(taker)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _started_at(pid: int) -> float:
    import psutil

    return psutil.Process(pid).create_time()
