"""Run cells one at a time in this process: provision the broker, drive the cell, tear down, land.

The steps are `lifecycle`'s, the same ones Airflow runs as separate tasks. A failed cell never stops the
sweep and never hides: its row says `failed` with the reason, whatever samples it produced are still
landed, and the run exits non-zero.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from ..brokers.handles import BrokerHandle
from ..errors import CellError, SixninesError
from ..lake.layout import Lake, RunInfo
from ..paths import cache_dir
from ..spec.cell import cell_id, series_key
from ..spec.matrix import Cell, Matrix, expand_repeats
from ..systems import resolve_version, system
from ..topology import hosts, netns
from ..topology.netns import Topology
from .drive import CellRun, Fault, drive_cell
from .hostparts import discard, drive_hosts, publish_cell
from .landing import CellReport, acked_metric, describe, land_cell
from .lifecycle import provision_brokers, stop_brokers

__all__ = [
    "CellReport",
    "acked_metric",
    "estimated_wall_s",
    "resolve_cells",
    "run_cell",
    "run_matrix",
    "select_cells",
]


def resolve_cells(matrix: Matrix) -> list[Cell]:
    """Resolve `version: latest` now; the resolved version is what the cell id and records carry.
    `[latest, X]` where X is the latest release gives one cell, not two."""
    resolved: dict[str, Cell] = {}
    for cell in matrix.cells:
        version = resolve_version(cell.spec.system, cell.spec.version)
        spec = cell.spec.model_copy(update={"version": version})
        new = cell.model_copy(update={"spec": spec, "id": cell_id(spec), "series_key": series_key(spec)})
        resolved.setdefault(new.id, new)
    return list(resolved.values())


def estimated_wall_s(cells: Sequence[Cell]) -> float:
    """A sweep's wall time for planning: every run of every cell (repeats included), its whole schedule plus
    its system's typical set-up and tear-down."""
    total = 0.0
    for cell in expand_repeats(list(cells)):
        w = cell.spec.workload
        total += w.warmup_s + w.measure_s + w.cooldown_s + system(cell.spec.system).setup_estimate_s
    return total


def select_cells(matrix: Matrix, only: Sequence[str] = ()) -> list[Cell]:
    cells = resolve_cells(matrix)
    if not only:
        return cells
    unresolved = {
        c.id: cell_id(c.spec.model_copy(update={"version": resolve_version(c.spec.system, c.spec.version)}))
        for c in matrix.cells
    }
    wanted = {unresolved.get(i, i) for i in only}
    unknown = wanted - {c.id for c in cells}
    if unknown:
        known = ", ".join(c.id for c in cells)
        raise SixninesError(f"no cell {', '.join(sorted(unknown))} in {matrix.source}; cells: {known}")
    return [c for c in cells if c.id in wanted]


def run_cell(
    cell: Cell,
    lake: Lake,
    run: RunInfo,
    console: Console,
    faults: Sequence[Fault] = (),
    gate_lag: bool = True,
) -> CellReport:
    started = dt.datetime.now(dt.UTC).isoformat()
    staging = lake.staging_dir(run, cell.instance)
    broker_dir = cache_dir() / "runs" / run.run_id / cell.instance
    brokers: BrokerHandle | None = None
    topology: Topology | None = None
    link_stats: dict = {}
    broker_context: dict = {}
    cell_run: CellRun | None = None
    generators: dict = {}
    status, reason = "ok", None
    try:
        from ..brokers.external import refuse_faults

        refuse_faults(cell, faults)
        hosts.check_runnable(cell, faults)
        topology = hosts.build(cell)  # namespaces for the cell's hosts, if it places roles on netns hosts
        brokers = provision_brokers(cell, broker_dir, topology=topology, run_id=run.run_id)
        broker_context = brokers.context()
        console.print(f"[bold]cell {cell.instance}[/] {cell.label}  ({brokers.address})", highlight=False)
        brokers.watch_leaders()
        if hosts.per_host(cell):  # one generator per real host, meeting through the lake
            folder = lake.hosts_dir(run, cell.instance)
            publish_cell(folder, cell, brokers.state())
            try:
                collected = drive_hosts(folder, cell, staging, console)
            finally:
                discard(folder)
            cell_run, generators = collected.run, collected.generators
            if collected.reason:
                status, reason = "failed", collected.reason
        else:
            cell_run = drive_cell(cell, brokers.target(), staging, brokers, console, faults, topology=topology)
    except CellError as exc:
        status, reason = "failed", str(exc)
        cell_run = exc.partial_run  # type: ignore[assignment]
    except Exception as exc:  # a failed cell is a result of the run, never a crash of the sweep
        status, reason = "failed", describe(cell, exc)
    finally:
        if brokers is not None:
            try:
                stop_brokers(brokers, staging, broker_context)
            except Exception as exc:
                if status == "ok":
                    status, reason = "failed", f"teardown: {describe(cell, exc)}"
        if topology is not None:
            try:
                link_stats = netns.link_stats(topology)
                netns.destroy(topology)
            except Exception as exc:
                if status == "ok":
                    status, reason = "failed", f"teardown: {describe(cell, exc)}"
        shutil.rmtree(broker_dir, ignore_errors=True)
    offsets = cell_run.clock_offsets if cell_run else None
    where = hosts.hosts_context(cell, topology, link_stats, offsets, generators)
    return land_cell(cell, lake, run, staging, cell_run, broker_context, status, reason, started, gate_lag, where)


def run_matrix(
    matrix: Matrix, lake_root: str | Path, console: Console, only: Sequence[str] = (), run: RunInfo | None = None
) -> tuple[RunInfo, list[CellReport]]:
    cells = select_cells(matrix, only)
    instances = expand_repeats(cells)
    run = run or RunInfo.new()
    lake = Lake(lake_root)
    repeated = f" ({len(instances)} with repeats)" if len(instances) > len(cells) else ""
    console.print(
        f"run {run.run_id}: {len(cells)} cell(s){repeated} of matrix '{matrix.name}' → {lake.run_dir(run)}",
        highlight=False,
    )
    reports = []
    for index, cell in enumerate(instances, 1):
        repeat = f", repeat {cell.repeat}/{cell.repeats}" if cell.repeats > 1 else ""
        console.rule(f"cell {index}/{len(instances)}{repeat}")
        reports.append(run_cell(cell, lake, run, console))
        if reports[-1].status != "ok":
            console.print(f"[red]cell {cell.instance} failed:[/] {reports[-1].reason}", highlight=False)
    return run, reports
