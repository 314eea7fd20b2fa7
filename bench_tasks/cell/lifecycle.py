"""The cell lifecycle as separate steps, shared by the CLI runner (one process) and Airflow (one task each).

`run_cell` composes `provision_step` → `drive` → `land` → `teardown_step` in one process. Airflow
runs the steps as tasks that start and end independently, so what must outlive a task runs detached and is
found again through files in the cell's work folder (`CellWork`):

    state.json        provision: resolved cell, run identity, lake, staging folder, brokers (PIDs, address)
    generator.json    the detached generator process (PID, start time)
    status.json       the generator's heartbeat, replaced atomically about every second (`cell_process`)
    cellrun.json      the generator's final facts: phase plan, faults, leader timeline, failure reason
    verdict-<phase>.json   why a phase watcher failed the cell, so `land` records it
    landed.json       what `land` committed: a retried land returns it instead of landing twice
    teardown.json     what teardown stopped and kept

Cells never overlap on a host, whichever DAG or run they belong to: `provision_step` takes the host lease
(`host.lease` in the cache) before starting anything and `teardown_step` gives it back. A lease whose cell
was torn down, or whose processes are all gone, is stale and taken over. A local analysis holds the host too
(`host_for_analysis`), shared with other analyses, so no Spark job runs beside a cell.

Brokers started for Airflow are detached (`tie_to_parent=False`): PR_SET_PDEATHSIG ties a child to the
*thread* that started it, and a task's thread ends with the task.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..brokers.external import ExternalBrokers, refuse_faults
from ..brokers.handles import BrokerHandle, PidNodes, reap_if_child
from ..brokers.process import kill_and_wait, stopped_on_failure
from ..brokers.provision import attach, provision, reuse_for
from ..errors import BrokerError, CellError, MatrixError, RoutesNotDeleted, SixninesError
from ..lake.layout import Lake, RunInfo, write_json
from ..lake.storage import lake_path
from ..paths import cache_dir
from ..secrecy import fingerprint, scrub_exception, split_secrets
from ..spec.cell import cell_id, series_key
from ..spec.kept import cell_from, cell_record
from ..spec.matrix import CELL_ADAPTER, Cell
from ..systems import UnknownSystem, resolve_release
from ..topology import hosts, netns
from ..topology.hosts import broker_site
from ..topology.netns import Topology, inside
from .drive import CellRun, check_cpus
from .hostparts import child_env, collect_parts, discard, publish_cell
from .landing import CellReport, describe, keep_broker_logs, land_cell

BROKER_POLICIES = ("fresh", "reuse")
PHASES = ("warmup", "measure", "cooldown")
_GENERATOR_GRACE_S = 30.0  # SIGTERM → the generator reaps its workers and writes its facts


@dataclass(frozen=True)
class CellWork:
    """The per-cell folder through which detached steps find each other."""

    root: Path

    @property
    def state(self) -> Path:
        return self.root / "state.json"

    @property
    def generator(self) -> Path:
        return self.root / "generator.json"

    @property
    def status(self) -> Path:
        return self.root / "status.json"

    @property
    def cellrun(self) -> Path:
        return self.root / "cellrun.json"

    @property
    def landed(self) -> Path:
        return self.root / "landed.json"

    @property
    def log(self) -> Path:
        return self.root / "generator.log"

    @property
    def brokers_dir(self) -> Path:
        return self.root / "brokers"

    def verdict(self, phase: str) -> Path:
        return self.root / f"verdict-{phase}.json"

    def read(self, path: Path) -> dict[str, Any] | None:
        """A JSON file of this folder, or None if it does not exist (yet)."""
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None

    def cell(self) -> Cell:
        state = self.read(self.state)
        if state is None:
            raise CellError("?", f"no provisioned cell in {self.root}")
        return cell_from(state)

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


# -- steps shared with the CLI runner ---------------------------------------------------------------------
def provision_brokers(
    cell: Cell, workdir: Path, tie_to_parent: bool = True, topology: Topology | None = None, run_id: str = ""
) -> BrokerHandle:
    """Start the brokers a cell needs (checked CPU placement first) and pin them where the cell says; with a
    topology, in the broker host's network namespace (every node of a cluster), listening and advertising on its
    address, with leaders asked from there; with one host per node, each node in its own host's namespace and
    the harness's side in the switch namespace, which reaches them all; for external brokers, create
    the cell's topics/streams (named after `run_id` too)."""
    check_cpus(cell)
    namespace, address = broker_site(cell, topology)
    sites = hosts.node_sites(cell, topology)
    with inside(namespace):  # the broker is forked from this thread, so it starts in the namespace
        brokers = provision(cell, workdir, tie_to_parent, address, run_id, namespace, sites)
    with stopped_on_failure(brokers.stop, f"the brokers of cell {cell.id}"):
        for pid in brokers.pids() if cell.spec.workload.cpus.broker else []:
            os.sched_setaffinity(pid, cell.spec.workload.cpus.broker)
    return brokers


def stop_brokers(brokers: BrokerHandle, staging: Path, broker_context: dict) -> None:
    """Stop the brokers (leaving no process), then keep their logs and leader timeline with the cell."""
    try:
        brokers.stop()
    finally:
        broker_context["leader_changes"] = brokers.leader_changes()
        broker_context["leader_poll_errors"] = brokers.leader_poll_errors()
        keep_broker_logs(brokers.logs(), staging)


def prepare_cell(cell: Cell, versions: Mapping[str, str] | None = None, phase_scale: float = 1.0) -> Cell:
    """The cell a run actually measures: a version override for its system, `latest` resolved, phase durations
    scaled; validated again, with a new id (a scaled or re-versioned cell is a different cell)."""
    spec = cell.spec.model_dump(mode="json")
    external = spec["brokers"] == "external"  # external brokers report their version; nothing to override
    if versions and spec["system"] in versions and not external:
        spec["version"] = versions[spec["system"]]
    spec["version"], release = resolve_release(spec["system"], spec["version"])
    if phase_scale <= 0:
        raise MatrixError(cell.matrix, [f"phase_scale: {phase_scale} — must be greater than 0"])
    if phase_scale != 1.0:
        for key in ("warmup_s", "measure_s", "cooldown_s"):
            spec["workload"][key] = round(spec["workload"][key] * phase_scale, 3)
    try:
        validated = CELL_ADAPTER.validate_python(spec)
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise MatrixError(cell.matrix, problems) from None
    return Cell(
        id=cell_id(validated),
        series_key=series_key(validated),
        matrix=cell.matrix,
        spec=validated,
        repeat=cell.repeat,
        repeats=cell.repeats,
        origin=cell.origin,
        release=release or cell.release,
    )


def broker_key(cell: Cell) -> str:
    """Identity of the brokers a cell needs: two cells with the same key can share a running cluster."""
    spec = cell.spec
    broker, held = split_secrets(spec.broker)
    what = {
        "system": spec.system,
        "version": spec.version,
        "broker": broker,
        "cpus": spec.workload.cpus.broker,
        **({"secrets": fingerprint(held)} if held else {}),  # a matrix's password decides, unreadably
    }
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]


HOST_POLL_ENV = "SIXNINES_HOST_POLL_S"
HOST_LEASE_ENV = "SIXNINES_HOST_LEASE"


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
        write_json(lease_path(), {"work": str(work.root), "cell": work.root.name, "since": _now(), "taker": _taker()})


def provision_when_free(
    cell: Cell,
    run: RunInfo,
    lake_root: Path,
    work: CellWork,
    *,
    poll_s: float = 5.0,
    on_wait: Callable[[str], None] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """`provision_step`, waiting while another cell holds the host: asks again every `host_poll_s(poll_s)`
    seconds and tells `on_wait` once why it waits."""
    told = False
    while True:
        try:
            return provision_step(cell, run, lake_root, work, **options)
        except HostBusy as busy:
            if on_wait is not None and not told:
                on_wait(str(busy))
                told = True
            time.sleep(host_poll_s(poll_s))


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


def release_host(work: CellWork) -> None:
    """Give the host back if this cell holds it."""
    with _lease_lock():
        holder = _lease_holder()
        if holder is not None and holder.get("work") == str(work.root):
            lease_path().unlink()


@contextlib.contextmanager
def host_for_analysis(run_id: str, poll_s: float = 5.0, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Keep cells off this host while an analysis runs on it (local Spark): Spark on the cells' cores would slow
    their brokers, and that latency would land in the tables as the broker's own. Analyses share the host with
    one another (they measure nothing); a cell waits until every one has ended, and an analysis waits for the
    cell holding the host (asking again every `host_poll_s(poll_s)` seconds, telling `on_wait` once why) unless
    this process or one that started it took that cell's lease: a test or `dags test` analysing beside its own
    cell would otherwise wait for itself."""
    entry: dict[str, Any] | None = {"run": run_id, "since": _now(), "taker": _taker(), "id": os.urandom(6).hex()}
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


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()


def _started_at(pid: int) -> float:
    import psutil

    return psutil.Process(pid).create_time()


# -- Airflow's steps --------------------------------------------------------------------------------------
def provision_step(
    cell: Cell,
    run: RunInfo,
    lake_root: Path,
    work: CellWork,
    policy: str = "fresh",
    clusters: Path | None = None,
    faults: list[dict] | None = None,
    hosts_key: str | None = None,
    tie_to_parent: bool = False,
    gate_lag: bool = True,
) -> dict[str, Any]:
    """Start (or, with policy `reuse`, find in `clusters`) detached brokers for `cell` and record them.

    `tie_to_parent`: the brokers die with this process (the CLI, which drives the cell itself); Airflow's are
    detached, because a task's thread ends with the task. `gate_lag`: land fails the cell on send lag (off for
    the CTRL+Z test, whose stall is meant to delay everything).

    The record is written before anything starts, so `land` can report a cell whose provisioning failed.
    A retried provision first stops what an earlier attempt left. A cell whose load runs on real hosts also
    gets its hosts folder in the lake (`hostparts`, named by `hosts_key`: the TaskGroup), where each host's
    generate task finds the cell and its brokers."""
    if policy not in BROKER_POLICIES:
        raise BrokerError(f"broker policy {policy!r}: expected one of {', '.join(BROKER_POLICIES)}")
    if work.state.exists():
        teardown_step(work, keep_reused=False)
    acquire_host(work)
    shutil.rmtree(work.root, ignore_errors=True)
    work.root.mkdir(parents=True)
    staging = Lake(lake_root).staging_dir(run, cell.instance)
    record: dict[str, Any] = {
        "schema_version": 1,
        **cell_record(cell, work.root / "secrets"),
        "run": asdict(run),
        "lake": str(lake_root),
        "staging": str(staging),
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "faults": faults or [],
        "provisioning": {"policy": policy, "reused": False, "cluster_key": broker_key(cell)},
        "brokers": None,
        "topology": None,
        "hosts_dir": None,
        "failure": None,
        "tie_to_parent": tie_to_parent,
        "gate_lag": gate_lag,
    }
    if hosts.uses_netns(cell):  # its broker lives in the cell's own namespace, which teardown removes
        record["provisioning"]["policy"] = "fresh"
    write_json(work.state, record)
    try:
        declared = [*(faults or []), *(f.model_dump() for f in cell.spec.faults)]  # the caller's and the matrix's
        refuse_faults(cell, declared)
        hosts.check_runnable(cell, declared)
        topology = hosts.build(cell, work_token(work))
        record["topology"] = topology.to_dict() if topology else None
        write_json(work.state, record)  # recorded before anything runs in it, so teardown always finds it
        provisioning = record["provisioning"]
        record["brokers"] = _brokers_for(cell, work, provisioning, clusters, topology, run.run_id, tie_to_parent)
        if hosts.per_host(cell):
            folder = Lake(lake_root).hosts_dir(run, hosts_key or cell.instance)
            record["hosts_dir"] = str(folder)
            publish_cell(folder, cell, record["brokers"])
    except Exception as exc:
        record["failure"] = f"provision: {describe(cell, exc)}"
        write_json(work.state, record)
        scrub_exception(exc)  # its message may quote a broker's config or log, and Airflow prints it
        raise
    write_json(work.state, record)
    return {
        "cell_id": cell.id,
        "label": cell.label,
        "address": record["brokers"]["address"],
        **record["provisioning"],
    }


def _brokers_for(
    cell: Cell,
    work: CellWork,
    provisioning: dict[str, Any],
    clusters: Path | None,
    topology: Topology | None = None,
    run_id: str = "",
    tied: bool = False,
) -> dict[str, Any]:
    if cell.spec.brokers == "external":  # nothing to reuse: only the cell's own topics/streams are made
        return provision_brokers(cell, work.brokers_dir, tie_to_parent=tied, run_id=run_id).state()
    entry = clusters / f"{provisioning['cluster_key']}.json" if clusters is not None else None
    if provisioning["policy"] == "reuse" and entry is not None and entry.exists():
        known = json.loads(entry.read_text())
        if all(attach(known).alive().values()):
            provisioning["reused"] = True
            return reuse_for(cell, known)
    brokers = provision_brokers(cell, work.brokers_dir, tie_to_parent=tied, topology=topology)
    state = brokers.state()
    if provisioning["policy"] == "reuse" and entry is not None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_json(entry, state)
    return state


def work_token(work: CellWork) -> str:
    """A short token unique to this cell's work folder (run and group): names its network namespaces."""
    return hashlib.sha256(str(work.root.resolve()).encode()).hexdigest()[:8]


def topology_of(state: dict[str, Any] | None) -> Topology | None:
    """The cell's namespaces as provision recorded them (None: the cell runs in the root namespace)."""
    data = (state or {}).get("topology")
    return Topology.from_dict(data) if data else None


def start_generator(work: CellWork) -> int:
    """Start the one process that drives the whole schedule (warmup → measure → cooldown → drain), detached in
    its own session so it outlives the task that started it. Calling it again returns the running one; a
    generator that already ended cannot be restarted (its schedule is gone)."""
    known = work.read(work.generator)
    if known is not None:
        if generator_alive(work, known):
            return int(known["pid"])
        raise CellError(work.cell().id, "the generator of this cell already ran; re-run the cell from provision")
    state = work.read(work.state)
    if state is None or state.get("brokers") is None:
        raise CellError("?", f"cannot start a generator: no provisioned brokers in {work.root}")
    env = child_env(cell_from(state), lake_path(state["lake"]))
    with open(work.log, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench_tasks", "cell", "drive", str(work.root)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    import psutil

    write_json(work.generator, {"pid": proc.pid, "create_time": psutil.Process(proc.pid).create_time()})
    return proc.pid


def land_step(work: CellWork) -> dict[str, Any]:
    """Airflow's land: `land` once, returning the landed summary (a retried land returns what it landed)."""
    state = _provisioned(work)
    run, cell = RunInfo(**state["run"]), cell_from(state)
    landed = work.read(work.landed)
    if landed is not None and Lake(state["lake"]).committed_cell_dir(run, cell.id, cell.lake_repeat) is not None:
        return landed  # a retried land: already committed, never twice
    return landed_summary(land(work), run)


def _provisioned(work: CellWork) -> dict[str, Any]:
    state = work.read(work.state)
    if state is None:
        raise CellError("?", f"nothing to land in {work.root}: the cell was never provisioned")
    return state


def land(work: CellWork) -> CellReport:
    """Land the cell: the generator is stopped first if a phase failed, then its samples, facts and context go
    to the lake in one atomic commit. The cell's status is the first failure found: provisioning, a phase
    watcher's verdict, the generator's own; then the analysis gate. The summary is kept in `landed.json`."""
    state = _provisioned(work)
    cell = cell_from(state)
    run = RunInfo(**state["run"])
    lake = Lake(state["lake"])
    stop_generator(work)
    staging = Path(state["staging"])
    staging.mkdir(parents=True, exist_ok=True)
    facts = work.read(work.cellrun) or {}
    reasons = [state.get("failure")]
    reasons += [(work.read(work.verdict(p)) or {}).get("reason") for p in PHASES]
    reasons.append(facts.get("reason") if facts.get("status") == "failed" else None)
    if facts.get("status") is None and state.get("brokers") is not None and work.read(work.generator):
        reasons.append("the generator ended without recording its result")
    collected = None
    if state.get("hosts_dir") and state.get("brokers") is not None:  # one generator per real host
        collected = collect_parts(lake_path(state["hosts_dir"]), cell, staging)
        reasons.append(collected.reason)
    reason = next((r for r in reasons if r), None)
    broker_context: dict[str, Any] = {"provisioning": state["provisioning"]}
    if state.get("brokers") is not None:
        brokers = attach(state["brokers"])
        broker_context.update(brokers.context())
        keep_broker_logs(brokers.logs(), staging)
    broker_context["leader_changes"] = facts.get("leader_changes", [])
    broker_context["leader_poll_errors"] = facts.get("leader_poll_errors", {"count": 0, "last": None})
    topology = topology_of(state)
    stats = netns.link_stats(topology) if topology is not None else {}
    cell_run = collected.run if collected is not None else CellRun.from_facts(facts, staging)
    offsets = cell_run.clock_offsets if cell_run is not None else None
    where = hosts.hosts_context(cell, topology, stats, offsets, collected.generators if collected else None)
    report = land_cell(
        cell,
        lake,
        run,
        staging,
        cell_run,
        broker_context,
        "failed" if reason else "ok",
        reason,
        state["started_at"],
        gate_lag=state.get("gate_lag", True),
        hosts=where,
    )
    write_json(work.landed, landed_summary(report, run))
    if state.get("hosts_dir"):
        discard(lake_path(state["hosts_dir"]))
    return report


def landed_summary(report: CellReport, run: RunInfo) -> dict[str, Any]:
    """The few facts of a landed cell worth passing on (XCom, notifications)."""
    return {
        "cell_id": report.cell.id,
        "series_key": report.cell.series_key,
        "repeat": report.cell.repeat,
        "repeats": report.cell.repeats,
        "label": report.cell.label,
        "status": report.status,
        "reason": report.reason,
        "path": str(report.path),
        "run_id": run.run_id,
        "run_date": run.run_date,
    }


def stop_generator(work: CellWork, grace_s: float = _GENERATOR_GRACE_S) -> list[int]:
    """SIGTERM the generator (it then reaps its workers and records its partial run), wait, then SIGKILL
    whatever is left of its process group. Returns the PIDs that had to be signalled."""
    known = work.read(work.generator)
    if known is None:
        return []
    signalled = []
    if _signal_generator(work, known, signal.SIGTERM):
        signalled.append(int(known["pid"]))
        deadline = time.monotonic() + grace_s
        while generator_alive(work, known) and time.monotonic() < deadline:
            time.sleep(0.1)
    group = _generator_group(known)
    signalled += [proc.pid for proc in group]
    # teardown checks for survivors right after this: each killed member must be gone by then
    kill_and_wait(group)
    for pid in signalled:
        reap_if_child(pid)
    return signalled


def teardown_step(work: CellWork, keep_reused: bool = True) -> dict[str, Any]:
    """Stop the generator and the brokers (graceful, then forced) and verify nothing of the cell survives.

    Safe to call any number of times. With policy `reuse` the brokers are kept for the next cell with the same
    broker spec (the run's last step releases them); everything else must be gone. External brokers keep running:
    their teardown deletes the cell's topics/streams (whatever happened before), listed as `deleted_routes`; a
    route the broker did not delete is listed with why (`routes_not_deleted`) and fails teardown once it is done."""
    stopped = stop_generator(work)
    state = work.read(work.state) or {}
    kept: list[int] = []
    brokers = attach(state["brokers"]) if state.get("brokers") else None
    external = isinstance(brokers, ExternalBrokers)
    deleted: list[str] = []
    not_deleted: RoutesNotDeleted | None = None
    if brokers is not None:
        if isinstance(brokers, ExternalBrokers):
            deleted, not_deleted = _delete_routes(brokers)
        elif keep_reused and state["provisioning"]["policy"] == "reuse":
            kept = brokers.pids()
        else:
            stopped += brokers.stop()
    survivors = [p.pid for p in _generator_group(work.read(work.generator))]
    if brokers is not None and not kept:
        survivors += brokers.running()
    topology = topology_of(state)
    if survivors:
        if topology is not None:  # the namespaces go even so; a survivor keeps running, but named nowhere
            netns.destroy(topology)
        raise BrokerError(f"teardown of {work.root}: processes still running: {sorted(survivors)}")
    if not kept:
        shutil.rmtree(work.brokers_dir, ignore_errors=True)
    removed = netns.destroy(topology) if topology is not None else []
    if state.get("hosts_dir"):
        discard(lake_path(state["hosts_dir"]))
    report: dict[str, Any] = {
        "stopped": sorted(set(stopped)),
        "kept": kept,
        "namespaces_removed": removed,
        "at": _now(),
    }
    if external:
        report["deleted_routes"] = deleted
        if not_deleted is not None:
            report["routes_not_deleted"] = not_deleted.failed
    if work.root.exists():
        write_json(work.root / "teardown.json", report)
    release_host(work)
    if not_deleted is not None:
        raise not_deleted
    return report


def _delete_routes(brokers: ExternalBrokers) -> tuple[list[str], RoutesNotDeleted | None]:
    """An external cell's routes deleted: those the broker confirmed, and its refusal of any others, which
    teardown raises only after it stopped everything else, recorded both and gave the host back."""
    try:
        return brokers.delete_routes(), None
    except RoutesNotDeleted as refused:
        return refused.deleted, refused


def release_clusters(clusters: Path) -> list[int]:
    """Stop every cluster kept for reuse in `clusters` (the end of a run with policy `reuse`)."""
    stopped: list[int] = []
    for entry in sorted(clusters.glob("*.json")) if clusters.exists() else []:
        state = json.loads(entry.read_text())
        brokers = attach(state)
        stopped += brokers.stop()
        if any(brokers.alive().values()):
            raise BrokerError(f"cluster {entry.stem} still running after stop: {brokers.pids()}")
        shutil.rmtree(state["workdir"], ignore_errors=True)
        entry.unlink()
    return stopped


def generator_alive(work: CellWork, known: dict[str, Any]) -> bool:
    """The recorded generator still runs (process_alive)."""
    return process_alive(known)


def process_alive(known: dict[str, Any]) -> bool:
    """The recorded process still runs (same PID *and* start time, so a recycled PID does not count). A zombie
    of it is reaped, if it is this process's child; a process that now holds its PID is left alone (waiting on it
    would take the exit status of a child of ours that merely got the same number)."""
    import psutil

    try:
        proc = psutil.Process(int(known["pid"]))
        if abs(proc.create_time() - float(known["create_time"])) >= 0.01:
            return False
        if proc.status() != psutil.STATUS_ZOMBIE:
            return True
    except psutil.NoSuchProcess:
        return False
    reap_if_child(int(known["pid"]))
    return False


def _signal_generator(work: CellWork, known: dict[str, Any], sig: int) -> bool:
    """Send `sig` to the recorded generator if it still runs; whether it was sent. Through a pidfd opened before
    its identity is checked: the signal reaches that very process or none, never one that was given its PID
    between the check and the signal."""
    try:
        pidfd = os.pidfd_open(int(known["pid"]))
    except ProcessLookupError:
        return False
    try:
        if not generator_alive(work, known):
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except ProcessLookupError:  # it ended since the check
        return False
    finally:
        os.close(pidfd)


def _generator_group(known: dict[str, Any] | None) -> list[Any]:
    """Live processes of the generator's session (its workers, multiprocessing's helpers): the group id is the
    generator's PID, and each member started after it. A group id is never given to a new process while any
    process is in that group; once the whole group is gone it is a free PID again, and a session leader started
    since (a Celery worker, a detached broker) may hold it: when a process other than the generator has its PID,
    the generator's group is empty and nothing is matched."""
    import psutil

    if known is None:
        return []
    pgid, since = int(known["pid"]), float(known["create_time"])
    with contextlib.suppress(psutil.NoSuchProcess):
        if abs(psutil.Process(pgid).create_time() - since) >= 0.01:
            return []
    members = []
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if (
                os.getpgid(proc.pid) == pgid
                and proc.info["create_time"] >= since - 0.01
                and proc.info["status"] != psutil.STATUS_ZOMBIE
                and (proc.pid != pgid or abs(proc.info["create_time"] - since) < 0.01)  # given the PID meanwhile
            ):
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess):
            continue
    return members
