"""The cell lifecycle as separate steps, shared by the CLI runner (one process) and Airflow (one task each).

`run_cell` composes `provision_step` → `drive` → `land` → `teardown_step` in one process. Airflow
runs the steps as tasks that start and end independently, so what must outlive a task runs detached and is
found again through files in the cell's work folder (`CellWork`):

    state.json        provision: resolved cell, its placement plan, run identity, lake, staging folder, brokers
                      (PIDs, address)
    generator.json    the detached generator process (PID, start time)
    status.json       the generator's heartbeat, replaced atomically about every second (`cell_process`)
    cellrun.json      the generator's final facts: phase plan, faults, leader timeline, failure reason
    verdict-<phase>.json   why a phase watcher failed the cell, so `land` records it
    landed.json       what `land` committed: a retried land returns it instead of landing twice
    teardown.json     what teardown stopped and kept

This module holds provision and land; beside it are the work folder (`work`), the host lease `provision_step`
takes and teardown gives back (`hostlease`), the detached generator (`detached`) and teardown (`teardown`).

Brokers started for Airflow are detached (`tie_to_parent=False`): PR_SET_PDEATHSIG ties a child to the
*thread* that started it, and a task's thread ends with the task.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..brokers.external import refuse_faults
from ..brokers.handles import BrokerHandle
from ..brokers.process import stopped_on_failure
from ..brokers.provision import attach, provision, reuse_for
from ..errors import BrokerError, CellError, MatrixError
from ..lake.layout import Lake, RunInfo, write_json
from ..lake.storage import lake_path
from ..load.drivers import worker_modules
from ..secrecy import fingerprint, scrub_exception, split_secrets
from ..spec.cell import cell_id, series_key
from ..spec.kept import cell_from, cell_record
from ..spec.matrix_model import CELL_ADAPTER, Cell
from ..systems import resolve_release
from ..topology import hosts, netns
from ..topology.netns import inside
from ..topology.plan import PlacementPlan, resolve_placement
from .detached import stop_generator, work_token
from .drive import CellRun, check_cpus
from .hostlease import HostBusy, acquire_host, host_poll_s, leave_host_once_loaded
from .hostparts import collect_parts, discard, publish_cell
from .landing import CellReport, cell_overhead, describe, keep_broker_logs, land_cell
from .teardown import teardown_step
from .work import BROKER_POLICIES, PHASES, CellWork

# state.json: 1: first version; 2: `placement` (the cell's placement plan, its namespaces included) replaces
#    `topology`; 3: `worker_modules` (what the generator's fork server imports; without it, every driver)
STATE_SCHEMA_VERSION = 3


# -- steps shared with the CLI runner ---------------------------------------------------------------------
def provision_brokers(
    cell: Cell, plan: PlacementPlan, workdir: Path, tie_to_parent: bool = True, run_id: str = ""
) -> BrokerHandle:
    """Start the brokers a cell needs (checked CPU placement first) and pin them where its plan says; with
    namespaces, in the broker host's network namespace (every node of a cluster), listening and advertising on its
    address, with leaders asked from there; with one host per node, each node in its own host's namespace and
    the harness's side in the switch namespace, which reaches them all; for external brokers, create
    the cell's topics/streams (named after `run_id` too)."""
    check_cpus(cell)
    namespace, address = plan.broker_site()
    sites = plan.node_sites
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
    on_recorded: Callable[[PlacementPlan], None] | None = None,
) -> dict[str, Any]:
    """Start (or, with policy `reuse`, find in `clusters`) detached brokers for `cell` and record them.

    `tie_to_parent`: the brokers die with this process (the CLI, which drives the cell itself); Airflow's are
    detached, because a task's thread ends with the task. `gate_lag`: land fails the cell on send lag (off for
    the CTRL+Z test, whose stall is meant to delay everything).

    The record is written before anything starts, so `land` can report a cell whose provisioning failed.
    A retried provision first stops what an earlier attempt left. A cell whose load runs on real hosts also
    gets its hosts folder in the lake (`hostparts`, named by `hosts_key`: the TaskGroup), where each host's
    generate task finds the cell and its brokers. `on_recorded` is called with the cell's placement once the
    cell is recorded and before its brokers start. The cell holds the host from here (`acquire_host`: HostBusy
    while another has it) until teardown (`leave_host_once_loaded`)."""
    if policy not in BROKER_POLICIES:
        raise BrokerError(f"broker policy {policy!r}: expected one of {', '.join(BROKER_POLICIES)}")
    if work.state.exists():
        teardown_step(work, keep_reused=False)
    declared = [*(faults or []), *(f.model_dump() for f in cell.spec.faults)]  # the caller's and the matrix's
    plan = resolve_placement(cell, work_token(work), declared)  # the namespaces named after this work folder
    acquire_host(work)
    shutil.rmtree(work.root, ignore_errors=True)
    work.root.mkdir(parents=True)
    record = _state_record(cell, run, lake_root, work, plan, policy, faults, tie_to_parent, gate_lag)
    write_json(work.state, record)  # its namespaces recorded before any exists, so teardown always finds them
    if on_recorded is not None:  # Airflow's provision holds the generator here, to start beside the brokers
        on_recorded(plan)
    try:
        refuse_faults(cell, declared)
        plan.check_runnable()
        if plan.topology is not None:
            netns.create(plan.topology)
        provisioning = record["provisioning"]
        record["brokers"] = _brokers_for(cell, plan, work, provisioning, clusters, run.run_id, tie_to_parent)
        if plan.per_host:
            folder = Lake(lake_root).hosts_dir(run, hosts_key or cell.instance)
            record["hosts_dir"] = str(folder)
            publish_cell(folder, cell, plan, record["brokers"])
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


def _state_record(
    cell: Cell,
    run: RunInfo,
    lake_root: Path,
    work: CellWork,
    plan: PlacementPlan,
    policy: str,
    faults: list[dict] | None,
    tie_to_parent: bool,
    gate_lag: bool,
) -> dict[str, Any]:
    """The cell's state as provisioning first records it: everything but its brokers, which are None until up."""
    staging = Lake(lake_root).staging_dir(run, cell.instance)
    record: dict[str, Any] = {
        "schema_version": STATE_SCHEMA_VERSION,
        **cell_record(cell, work.root / "secrets"),
        "run": asdict(run),
        "lake": str(lake_root),
        "staging": str(staging),
        "started_at": dt.datetime.now(dt.UTC).isoformat(),
        "faults": faults or [],
        "provisioning": {"policy": policy, "reused": False, "cluster_key": broker_key(cell)},
        "brokers": None,
        "placement": plan.to_dict(),
        "hosts_dir": None,
        "failure": None,
        "tie_to_parent": tie_to_parent,
        "gate_lag": gate_lag,
        "worker_modules": worker_modules(cell.spec),  # what the generator's fork server imports
    }
    if plan.uses_netns:  # its broker lives in the cell's own namespace, which teardown removes
        record["provisioning"]["policy"] = "fresh"
    return record


def _brokers_for(
    cell: Cell,
    plan: PlacementPlan,
    work: CellWork,
    provisioning: dict[str, Any],
    clusters: Path | None,
    run_id: str = "",
    tied: bool = False,
) -> dict[str, Any]:
    if cell.spec.brokers == "external":  # nothing to reuse: only the cell's own topics/streams are made
        return provision_brokers(cell, plan, work.brokers_dir, tie_to_parent=tied, run_id=run_id).state()
    entry = clusters / f"{provisioning['cluster_key']}.json" if clusters is not None else None
    if provisioning["policy"] == "reuse" and entry is not None and entry.exists():
        known = json.loads(entry.read_text())
        if all(attach(known).alive().values()):
            provisioning["reused"] = True
            return reuse_for(cell, known)
    brokers = provision_brokers(cell, plan, work.brokers_dir, tie_to_parent=tied)
    state = brokers.state()
    if provisioning["policy"] == "reuse" and entry is not None:
        entry.parent.mkdir(parents=True, exist_ok=True)
        write_json(entry, state)
    return state


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
    leave_host_once_loaded(work, state)
    landing_from_s = time.time()  # the cell's overhead ends here: what follows is landing's own work
    staging = Path(state["staging"])
    staging.mkdir(parents=True, exist_ok=True)
    facts = work.read(work.cellrun) or {}
    reasons = [state.get("failure")]
    reasons += [(work.read(work.verdict(p)) or {}).get("reason") for p in PHASES]
    reasons.append(facts.get("reason") if facts.get("status") == "failed" else None)
    if facts.get("status") is None and state.get("brokers") is not None and work.read(work.generator):
        reasons.append("the generator ended without recording its result")
    plan = PlacementPlan.from_dict(state["placement"])
    collected = None
    if state.get("hosts_dir") and state.get("brokers") is not None:  # one generator per real host
        collected = collect_parts(lake_path(state["hosts_dir"]), cell, plan, staging)
        reasons.append(collected.reason)
    reason = next((r for r in reasons if r), None)
    broker_context: dict[str, Any] = {"provisioning": state["provisioning"]}
    if state.get("brokers") is not None:
        brokers = attach(state["brokers"])
        broker_context.update(brokers.context())
        keep_broker_logs(brokers.logs(), staging)
    broker_context["leader_changes"] = facts.get("leader_changes", [])
    broker_context["leader_poll_errors"] = facts.get("leader_poll_errors", {"count": 0, "last": None})
    stats = netns.link_stats(plan.topology) if plan.topology is not None else {}
    cell_run = collected.run if collected is not None else CellRun.from_facts(facts, staging)
    offsets = cell_run.clock_offsets if cell_run is not None else None
    where = hosts.hosts_context(cell, plan, stats, offsets, collected.generators if collected else None)
    overhead = cell_overhead(state["started_at"], cell_run, landing_from_s)
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
        overhead=overhead,
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
