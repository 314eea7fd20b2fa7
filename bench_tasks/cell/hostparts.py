"""One generator per load-generator host: how a cell whose load runs on real hosts is driven and landed.

A cell places producers and consumers on named hosts (`hosts:` + `workload.placement`). Network-namespace
hosts all live on this machine, so one generator drives them all. Real hosts are separate machines (Airflow
Celery workers, each serving its host's queue): each runs a generator over its own workers only, and they
meet through the lake (`rendezvous`), the one place every host reaches:

1. provision (default queue) starts or reaches the brokers and writes `cell.json` to the cell's hosts folder:
   the resolved cell, its placement plan (`topology.plan`) and its brokers' record without secrets, and the
   cell's secret settings and the brokers' per-cell credentials sealed under the deployment's shared key
   (`secrecy.seal`; external brokers' credentials come from each host's own Airflow connection);
2. each host's generate task starts its receivers and producers; the first load host creates the routes
   (topics, streams, prefill) and the others wait for it;
3. once its workers are ready each host notes the time; t0 is the latest note plus a margin, computed alike by
   every host — the common scheduled start of every producer;
4. every stamp is taken on the host clock (`clock.host_clock`: CLOCK_MONOTONIC moved onto the wall-clock
   epoch), so one-way latency between hosts of one clock domain (PTP/NTP-disciplined) compares; across
   domains the matrix must measure rtt or accept a measured offset (`placement` rules);
5. a host stops when every host's producers are done and everything sent was received (or the drain
   timeout), then leaves its samples under `parts/<host>/` and its facts; land (default queue) merges them
   into one cell, failed with the first host's reason if any host failed or never reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from subprocess import Popen
from typing import Any

from rich.console import Console

from ..brokers.handles import client_of
from ..brokers.provision import attach
from ..errors import CellError
from ..lake.s3conf import CONN_ID_ENV
from ..lake.storage import LakePath, S3Path, get_folder, put_folder, remove_tree, write_text
from ..paths import cache_dir
from ..secrecy import merge_secrets, seal, split_secrets, unseal
from ..spec.matrix_model import Cell
from ..topology import HOSTS_TIMEOUT_S
from ..topology.plan import PlacementPlan
from ..topology.rendezvous import HostPart, Rendezvous
from .drive import CellRun, drive
from .faults import NoFaults
from .landing import describe

CELL_FILE = "cell.json"
# 1: cell, brokers (without client settings); 2: the cell recorded (secrets redacted), and `sealed`: its secret
#    settings and the brokers' client settings, sealed (secrecy.seal) for the load hosts (None: there are none);
# 3: `placement`, the cell's placement plan as provision resolved it
_SCHEMA_VERSION = 3


def publish_cell(folder: LakePath, cell: Cell, plan: PlacementPlan, brokers: dict[str, Any]) -> None:
    """Provision's part: start the rendezvous afresh (a retried provision) with what every host needs: the cell,
    its placement plan, its brokers."""
    remove_tree(folder)
    public, held = split_secrets(cell)
    client = client_of(brokers) if brokers.get("kind") == "provisioned" else {}
    record = {
        "schema_version": _SCHEMA_VERSION,
        "cell": public,
        "placement": plan.to_dict(),
        "brokers": {k: v for k, v in brokers.items() if k not in ("client", "client_secrets")},
        "sealed": seal({"cell": held, "client": client}),  # secrets reach the lake sealed only
    }
    write_text(folder / CELL_FILE, json.dumps(record, indent=2))


def run_host_part(folder: LakePath, host: str, staging: Path, console: Console) -> dict[str, Any]:
    """Drive this host's share of the cell published in `folder`, then leave its samples and facts there.
    Returns the facts (`status` ok or failed, with the reason); never raises for a failed cell."""
    try:
        record = json.loads((folder / CELL_FILE).read_text())
    except FileNotFoundError:
        raise CellError("?", f"no provisioned cell in {folder / CELL_FILE}: did its provision task run?") from None
    sealed = unseal(record.get("sealed"))
    cell = Cell.model_validate(merge_secrets(record["cell"], sealed.get("cell") or {}))
    brokers = {**record["brokers"], "client": sealed.get("client") or {}}
    plan = PlacementPlan.from_dict(record["placement"])
    hosts = plan.load_hosts
    if host not in hosts:
        raise CellError(cell.id, f"host {host!r} runs none of this cell's load; its load hosts: {', '.join(hosts)}")
    part = HostPart(host, Rendezvous(folder, hosts, host, cell.id), leader=host == hosts[0])
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    console.print(f"[bold]cell {cell.instance}[/] {cell.label}: host {host} of {', '.join(hosts)}", highlight=False)
    try:
        driven = drive(cell, plan, attach(brokers).target(), staging, NoFaults(), console, part=part)
    except BaseException as exc:  # a task killed (SIGTERM, timeout) still tells the other hosts and land
        _leave(part, staging, None, "failed", describe(cell, exc))
        raise
    return _leave(part, staging, driven.run, driven.status, driven.reason)


def _leave(part: HostPart, staging: Path, run: CellRun | None, status: str, reason: str | None) -> dict[str, Any]:
    """Samples first, facts last: land takes a host's samples only once its facts are there."""
    if reason is not None:
        part.rendezvous.fail(reason)
    put_folder(staging, part.rendezvous.folder / "parts" / part.host)
    facts = {
        **(run.facts() if run is not None else {"plan": None}),
        "status": status,
        "reason": reason,
        "clock_shift_ns": part.clock_shift_ns,
    }
    part.rendezvous.note("facts", facts)
    return facts


@dataclass
class Collected:
    """A cell's host parts merged: one run, the first failure, and what each host's generator reported."""

    run: CellRun | None
    reason: str | None
    generators: dict[str, dict[str, Any]]


def collect_parts(folder: LakePath, cell: Cell, plan: PlacementPlan, staging: Path) -> Collected:
    """Land's part: every host's samples into the cell's staging folder and their facts merged into one run,
    with the first failure (a host's own reason, or a host that never reported)."""
    hosts = plan.load_hosts
    notes = Rendezvous(folder, hosts, "", cell.id).notes("facts")
    generators = {
        h: {"queue": plan.queue_of(h), **({k: n[k] for k in ("status", "reason", "clock_shift_ns")} if n else {})}
        for h in hosts
        for n in [notes.get(h)]
    }
    reasons: list[str] = []
    for host in hosts:
        facts = notes.get(host)
        if facts is None:
            reasons.append(
                f"host {host}: its generator never reported (is a worker serving queue {plan.queue_of(host)!r} "
                "running, and did its generate task start?)"
            )
            continue
        if facts["status"] != "ok":
            reasons.append(f"host {host}: {facts['reason']}")
        get_folder(folder / "parts" / host, staging)
    started = [f for f in notes.values() if f.get("plan")]
    if not started:
        return Collected(None, reasons[0] if reasons else "no host started the schedule", generators)
    plans = {json.dumps(f["plan"], sort_keys=True) for f in started}
    if len(plans) > 1:
        reasons.append(f"hosts disagree on the schedule (t0 / phases): {sorted(plans)}")
    merged = {
        **started[0],
        "faults": [],
        "lagging_consumed": sum(f.get("lagging_consumed", 0) for f in started),
        "relayed": sum(f.get("relayed", 0) for f in started),
        "clock_offsets": [o for f in started for o in f.get("clock_offsets", [])],
        "harness": {name: facts for f in started for name, facts in f.get("harness", {}).items()},
    }
    return Collected(CellRun.from_facts(merged, staging), reasons[0] if reasons else None, generators)


def discard(folder: LakePath) -> None:
    """Remove a cell's hosts folder once landed (and its run's folder when that is left empty)."""
    remove_tree(folder)
    if isinstance(folder, Path):
        with contextlib.suppress(OSError):
            folder.parent.rmdir()


def child_env(cell: Cell, lake: LakePath) -> dict[str, str]:
    """The environment of a process that drives a cell (or a host's part) outside the task that starts it: secrets
    reach it in memory (its environment), never through a file."""
    return {**base_env(), **secret_env(cell, lake)}


def base_env() -> dict[str, str]:
    """What every process driving a cell has in its environment: this one's, and where the cache is."""
    return {**os.environ, "SIXNINES_CACHE": str(cache_dir())}


def secret_env(cell: Cell, lake: LakePath) -> dict[str, str]:
    """The secrets a cell's driving process needs beyond `base_env` (none for local brokers on a local lake): the
    external brokers' connection, and for an S3 lake the credentials this process resolved (from the lake
    connection, inside Airflow)."""
    env: dict[str, str] = {}
    if cell.spec.brokers == "external":
        from ..brokers.connections import env_var, get_connection

        assert cell.spec.connection is not None
        env[env_var(cell.spec.connection)] = get_connection(cell.spec.connection).to_json()
    if isinstance(lake, S3Path):
        env.update(lake.settings.environment())
        env[CONN_ID_ENV] = ""  # the child uses those credentials, never a connection it cannot reach
    return env


def start_host(folder: LakePath, host: str, staging: Path, env: dict[str, str], pipe: bool = False) -> Popen:
    """One host's part as its own process (`sixnines cell host`): a fresh interpreter, because a Celery
    worker's task process is daemonic and may not start the part's worker processes itself."""
    return subprocess.Popen(
        [sys.executable, "-m", "bench_tasks", "cell", "host", str(folder), host, str(staging)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if pipe else None,
        stderr=subprocess.STDOUT if pipe else None,
        text=pipe,
        env=env,
    )


def stop_hosts(procs: list[Popen]) -> None:
    """SIGTERM what still runs (it records its partial part, tells the other hosts), then SIGKILL."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_host(folder: LakePath, host: str, staging: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Airflow's generate task: this host's part in its own process, its output into the task log; returns the
    facts it left (or a failure saying it left none). Whatever ends the task also ends the process."""
    cell = Cell.model_validate(json.loads((folder / CELL_FILE).read_text())["cell"])
    proc = start_host(folder, host, staging, child_env(cell, folder), pipe=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            log(line.rstrip())
        proc.wait()
    finally:
        stop_hosts([proc])
    facts = Rendezvous(folder, (host,), host, cell.id).read("facts", host)
    if facts is None:
        return {"status": "failed", "reason": f"its generator exited with code {proc.returncode} before reporting"}
    return facts


def run_hosts(folder: LakePath, cell: Cell, plan: PlacementPlan, console: Console) -> None:
    """The CLI's way to run a cell on real hosts from one machine: one `sixnines cell host` process per load
    host, started together like the generate tasks of separate workers; land collects their parts."""
    w = cell.spec.workload
    budget = HOSTS_TIMEOUT_S * 2 + w.warmup_s + w.measure_s + w.cooldown_s + w.drain_timeout_s + 120
    base = cache_dir() / "host-parts" / folder.name
    env = child_env(cell, folder)
    procs = {host: start_host(folder, host, base / host, env) for host in plan.load_hosts}
    try:
        deadline = time.monotonic() + budget
        for host, proc in procs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                console.print(f"[red]host {host}: its generator did not end within {budget:.0f} s[/]")
                break
    finally:
        stop_hosts(list(procs.values()))
        shutil.rmtree(base, ignore_errors=True)
