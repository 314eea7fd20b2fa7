"""The tasks of one cell's TaskGroup: thin wrappers over `bench_tasks.cell.lifecycle`, one step each.

    provision (setup) → warmup → measure → cooldown → land → teardown (teardown)
    provision (setup) → generate_<host> (one per load host, together) → land → teardown (teardown)

`warmup` starts the detached generator, which drives the whole schedule without a gap; the three phase tasks
only watch it. A cell whose load runs on real hosts has instead one `generate_<host>` task per load host, each
on its host's queue, driving that host's share and meeting the others through the lake (`bench_tasks.cell.hostparts`).

`land` runs whatever happened before it (trigger rule all_done): a failed cell is landed with its reason, then
fails the task so the notifier fires. Every task finds the cell through its work folder (`runtime.work_for`), or
on a load host through the cell's hosts folder in the lake, so none depends on another's XCom to clean up.

Retries: provision, land and teardown are idempotent and retried; a phase watcher is not, because a
schedule that has passed cannot be watched again (retrying the cell means re-running its group).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from datetime import timedelta
from typing import Any, NoReturn

from airflow.sdk import get_current_context, setup, task, teardown
from airflow.sdk.exceptions import AirflowFailException, AirflowRescheduleException, AirflowSkipException

from bench_tasks import HOST_WAIT_S, HOSTS_TIMEOUT_S, WAITING_SUFFIX, Cell, cell_from_matrix, scrub_text, system_of

from .notifier import CellFailureNotifier
from .runtime import POOL, clusters_for, group_of, lake_root, run_dir, run_info, standbys_for, work_for

log = logging.getLogger("sixnines")
MAX_PHASE_SCALE = 10.0
_STARTUP_S = 300  # worker start, topic creation, drain: on top of a phase's scheduled length
RELEASE_FETCH = timedelta(minutes=30)  # provision may first download and assemble a release not yet cached
HOST_WAIT = timedelta(seconds=HOST_WAIT_S)  # how long a cell waits for another DAG's cell to leave the host
HOST_POLL = timedelta(seconds=15)  # unless SIXNINES_HOST_POLL_S says otherwise


def _skipped(work: Any) -> bool:
    return (work.root / "skipped.json").exists()


@setup
@task(pool=POOL, retries=1, retry_delay=timedelta(seconds=10), trigger_rule="all_done")
def provision(cell: dict[str, Any], source: str | None = None) -> dict[str, Any]:
    """Start this cell's brokers (detached) or reuse identical running ones, per the run's params. `cell` is the
    cell as recorded (what the UI shows of the task's arguments: its secret settings redacted), which takes them
    back from its matrix file `source`.

    Runs whatever the previous cell's outcome (trigger rule all_done): a failed cell never stops the sweep.
    While another cell (of any DAG or run) holds the host, the task is rescheduled, which frees its pool
    slot and worker for the cell that is running."""
    from bench_tasks import HostBusy, prepare_cell, provision_step, published_run, release_generator  # in tasks only

    context = get_current_context()
    params = context["params"]
    work = work_for(context)
    try:
        base = cell_from_matrix(cell, source)
        prepared = prepare_cell(base, params["versions"], params["phase_scale"])
    except Exception as exc:
        work.root.mkdir(parents=True, exist_ok=True)
        (work.root / "failure.json").write_text(json.dumps({"reason": scrub_text(f"provision: {exc}")}))
        raise
    wanted = set(params["cells"])
    if wanted and not wanted & {work.root.name, base.id, prepared.id}:
        _skip(
            work, {"selected": sorted(wanted)}, f"cell {prepared.id} ({work.root.name}) is not among the selected cells"
        )
    if params.get("reuse_published") and (published := published_run(lake_root(), prepared.id)) is not None:
        _skip(work, {"published": list(published)}, f"cell {prepared.id} is published by run {published[1]}: reused")
    if prepared.release and prepared.release.get("offline"):
        log.warning("%s: %s", prepared.release["requested"], prepared.release["offline"])
    try:
        info = provision_step(
            prepared,
            run_info(context),
            lake_root(),
            work,
            params["broker_policy"],
            clusters_for(context),
            hosts_key=work.root.name,
            on_recorded=lambda plan: _hold_generator_here(work, plan),
        )
    except HostBusy as busy:
        _wait_for_host(work, str(busy))
    finally:  # a held generator drives once the brokers are recorded; otherwise it ends without driving
        release_generator(work, go=_provisioned(work))
    log.info("provisioned %s", json.dumps(info))
    return info


def _provisioned(work: Any) -> bool:
    """The cell's brokers are up and recorded: provision succeeded."""
    state = work.read(work.state) or {}
    return state.get("brokers") is not None and state.get("failure") is None


def _hold_generator_here(work: Any, plan: Any) -> None:
    """When this worker is the cell's load host too, start the generator while the brokers start: its start-up
    (imports, the workers' fork server, the system's driver) then runs beside theirs, and it drives once
    provision releases it (`detached.release_generator`); `warmup` only watches it. A cell whose load runs on
    other hosts' workers is started there (`warmup` on the load host's queue, or each host's `generate`)."""
    from bench_tasks import start_generator

    if not plan.per_host and plan.generator_queue is None:
        pid = start_generator(work, held=True, standbys=standbys_for(get_current_context()))
        log.info("generator pid %s (log: %s), held until the brokers are up", pid, work.log)


def _skip(work: Any, record: dict[str, Any], why: str) -> NoReturn:
    """Skip this cell's tasks (land and the verdict read `skipped.json`)."""
    work.root.mkdir(parents=True, exist_ok=True)
    (work.root / "skipped.json").write_text(json.dumps(record))
    raise AirflowSkipException(why)


def _wait_for_host(work: Any, why: str) -> NoReturn:
    """Reschedule provision until the host is free (or fail after HOST_WAIT)."""
    marker = work.root.parent / f"{work.root.name}{WAITING_SUFFIX}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    if not marker.exists():
        marker.write_text(dt.datetime.now(dt.UTC).isoformat())
    waited = dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(marker.read_text())
    if waited > HOST_WAIT:
        raise AirflowFailException(f"{why}; gave up after waiting {waited}")
    from bench_tasks import host_poll_s

    poll = timedelta(seconds=host_poll_s(HOST_POLL.total_seconds()))
    log.info("%s; checking again in %s (waiting for %s)", why, poll, waited)
    raise AirflowRescheduleException(dt.datetime.now(dt.UTC) + poll)


def _watch(phase: str) -> dict[str, Any]:
    from bench_tasks import start_generator, watch_phase

    work = work_for(get_current_context())
    if phase == "warmup" and work.read(work.generator) is None:  # not started by provision: this is the load host
        log.info("generator pid %s (log: %s)", start_generator(work), work.log)
    return watch_phase(work, phase, log=log.info)


@task(pool=POOL, retries=0)
def warmup() -> dict[str, Any]:
    """Watch the warmup phase, starting the generator for the whole schedule if provision did not."""
    return _watch("warmup")


@task(pool=POOL, retries=0)
def measure() -> dict[str, Any]:
    """Watch the measure phase: progress, live percentiles, schedule lag; fail if the generator or a broker dies."""
    return _watch("measure")


@task(pool=POOL, retries=0)
def cooldown() -> dict[str, Any]:
    """Watch the cooldown phase and wait for the generator to drain and exit."""
    return _watch("cooldown")


@task(retries=0)
def generate(host: str) -> dict[str, Any]:
    """Drive this host's share of a cell whose load runs on real hosts, on the worker serving the host's queue;
    the cell's other hosts run theirs at the same time and all start on one agreed schedule.

    Outside the one-slot pool on purpose: a cell's hosts must run together (serialised they would wait for each
    other until the rendezvous times out); the cell's provision holds the benchmark host for them. Not retried:
    a schedule that has passed cannot be joined again."""
    from bench_tasks import Lake, run_host

    context = get_current_context()
    run, group = run_info(context), group_of(context)
    folder = Lake(lake_root()).hosts_dir(run, group)
    staging = run_dir(context) / group / f"host-{host}"
    try:
        facts = run_host(folder, host, staging, log.info)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if facts["status"] != "ok":
        raise AirflowFailException(f"host {host}: {facts['reason']}")
    return {"host": host, "status": facts["status"], "plan": facts["plan"]}


def generate_timeout(cell: Cell) -> timedelta:
    """A generate task's execution timeout: the scaled schedule and drain, plus waiting for the other hosts."""
    w = cell.spec.workload
    return phase_timeout(w.warmup_s + w.measure_s + w.cooldown_s + w.drain_timeout_s) + timedelta(
        seconds=2 * HOSTS_TIMEOUT_S
    )


@task(
    pool=POOL,
    retries=1,
    retry_delay=timedelta(seconds=10),
    trigger_rule="all_done",
    on_failure_callback=CellFailureNotifier(),
)
def land(standby: bool = False) -> dict[str, Any]:
    """Commit the cell's samples, tables and row atomically, whatever happened before; fail if the cell failed.

    `standby`: another cell follows whose generator runs on this worker; a standby generator for it starts first
    (`bench_tasks.cell.standby`), while this cell still holds the host."""
    context = get_current_context()
    work = work_for(context)
    if _skipped(work):
        raise AirflowSkipException("cell not selected")
    if standby:
        from bench_tasks import base_env, start_standby

        log.info("standby generator pid %s for the next cell", start_standby(standbys_for(context), base_env()))
    failure = work.read(work.root / "failure.json")
    if work.read(work.state) is None and failure is not None:
        raise AirflowFailException(failure["reason"])
    from bench_tasks import land_step

    summary = land_step(work)
    log.info("landed %s", json.dumps(summary))
    if summary["status"] != "ok":
        raise AirflowFailException(f"cell {summary['cell_id']} failed: {summary['reason']}")
    return summary


@teardown
@task(pool=POOL, retries=2, retry_delay=timedelta(seconds=5))
def stop() -> dict[str, Any]:
    """Stop the generator and brokers and verify no process of the cell survives (safe to run twice)."""
    from bench_tasks import teardown_step

    report = teardown_step(work_for(get_current_context()))
    log.info("teardown %s", json.dumps(report))
    return report


def phase_timeout(seconds: float) -> timedelta:
    """A phase task's execution timeout: its longest scaled length plus start-up and drain."""
    return timedelta(seconds=seconds * MAX_PHASE_SCALE + _STARTUP_S)


def cell_seconds(cell: Cell, measure_s: float | None = None) -> float:
    """A cell's planned time: its schedule (measured `measure_s` seconds when given, as a capacity step is), its
    drain and its system's typical set-up and tear-down."""
    w = cell.spec.workload
    schedule = w.warmup_s + (measure_s or w.measure_s) + w.cooldown_s + w.drain_timeout_s
    return schedule + system_of(cell.spec).setup_estimate_s


def cell_timeout(cell: Cell, measure_s: float | None = None) -> timedelta:
    """The execution timeout of a cell task whose own length nothing predicts better (provision, land, teardown,
    a capacity step): the cell's whole planned time at the longest phase scale, plus start-up. None of them may
    take longer than the cell they serve, and a hung one must not hold the host and the pool."""
    return phase_timeout(cell_seconds(cell, measure_s))
