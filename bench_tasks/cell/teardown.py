"""A cell's teardown: the detached generator stopped, its brokers stopped (or kept for reuse), the routes it
created on external brokers deleted, and the host lease given back, whatever happened before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..brokers.external import ExternalBrokers
from ..brokers.provision import attach
from ..errors import BrokerError, RoutesNotDeleted
from ..lake.layout import write_json
from ..lake.storage import lake_path
from ..topology import netns
from .detached import generator_group, stop_generator, topology_of
from .hostlease import leave_host_once_loaded, now_iso, release_host
from .hostparts import discard
from .work import CellWork


def teardown_step(work: CellWork, keep_reused: bool = True) -> dict[str, Any]:
    """Stop the generator and the brokers (graceful, then forced) and verify nothing of the cell survives.

    Safe to call any number of times. With policy `reuse` the brokers are kept for the next cell with the same
    broker spec (the run's last step releases them); everything else must be gone. External brokers keep running:
    their teardown deletes the cell's topics/streams (whatever happened before), listed as `deleted_routes`; a
    route the broker did not delete is listed with why (`routes_not_deleted`) and fails teardown once it is done."""
    stopped = stop_generator(work)
    state = work.read(work.state) or {}
    leave_host_once_loaded(work, state)
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
    survivors = [p.pid for p in generator_group(work.read(work.generator))]
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
        "at": now_iso(),
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
