"""Run cells one at a time in this process, through the very steps Airflow runs as tasks (`lifecycle`):
provision (the host lease taken, brokers started, tied to this process) → drive (in this process, or one
`sixnines cell host` process per real load host) → land → teardown. A failed cell never stops the sweep and never
hides: its row says `failed` with the reason, whatever samples it produced are still landed, and the run exits
non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace

from rich.console import Console
from rich.markup import escape

from ..errors import CellError, SixninesError
from ..lake.layout import Lake, RunInfo
from ..lake.storage import lake_path
from ..paths import cache_dir
from ..secrecy import without_userinfo
from ..spec.cell import cell_id, series_key
from ..spec.matrix_model import Cell, Matrix
from ..spec.repeats import expand_repeats
from ..systems import resolve_release, resolve_version, system
from ..topology.plan import PlacementPlan
from .drive import Fault
from .hostparts import run_hosts
from .landing import CellReport, acked_metric
from .lifecycle import land, prepare_cell, provision_when_free
from .process import drive_work
from .teardown import teardown_step
from .verdict import discard_cell_work
from .work import CellWork
from .workerctx import prestart

__all__ = [
    "CellReport",
    "acked_metric",
    "estimated_wall_s",
    "resolve_cells",
    "run_cell",
    "run_matrix",
    "select_cells",
]
HOST_POLL_S = 5.0  # how often a cell waiting for the host (another run's cell holds it) asks again, unless
# SIXNINES_HOST_POLL_S says otherwise (hostlease.host_poll_s)


def resolve_cells(matrix: Matrix) -> list[Cell]:
    """Resolve `latest` and lines (`4.3.x`) now; the resolved version is what the cell id and records carry.
    `[latest, X]` where X is the latest release gives one cell, not two."""
    resolved: dict[str, Cell] = {}
    for cell in matrix.cells:
        version, release = resolve_release(cell.spec.system, cell.spec.version)
        spec = cell.spec.model_copy(update={"version": version})
        update = {"spec": spec, "id": cell_id(spec), "series_key": series_key(spec), "release": release}
        new = cell.model_copy(update=update)
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
    """One cell, start to landed. `gate_lag` off: a schedule the cell delays on purpose (the CTRL+Z test)."""
    work = CellWork(cache_dir() / "runs" / run.run_id / cell.instance)
    prestart()  # the workers' fork server imports while the brokers start (once per process)
    try:
        _provision(cell, run, lake, work, faults, gate_lag, console)
        _drive(work, cell, console)
        report = land(work)
    finally:
        problem = _teardown(work)
        discard_cell_work(work.root)
    if problem and report.status == "ok":  # landed before the teardown failed: the run still says so
        console.print(f"[red]cell {cell.instance}: teardown failed:[/] {escape(problem)}", highlight=False)
        report = replace(report, status="failed", reason=f"teardown: {problem}")
    return report


def _teardown(work: CellWork) -> str | None:
    """Stop everything the cell started and give the host back; what went wrong, if anything."""
    try:
        teardown_step(work, keep_reused=False)
    except SixninesError as exc:
        return str(exc)
    return None


def _provision(
    cell: Cell, run: RunInfo, lake: Lake, work: CellWork, faults: Sequence[Fault], gate_lag: bool, console: Console
) -> None:
    """Provision once the host is free; a failure is recorded for land, not raised."""

    def waiting(why: str) -> None:
        console.print(f"waiting for the host: {escape(why)}", highlight=False)

    try:
        provision_when_free(
            cell,
            run,
            lake.root,
            work,
            poll_s=HOST_POLL_S,
            on_wait=waiting,
            faults=[asdict(f) for f in faults],
            tie_to_parent=True,
            gate_lag=gate_lag,
        )
    except Exception as exc:  # recorded in the work folder's state: land reports it as the cell's reason
        if work.read(work.state) is None:  # failed before the record existed: land would have nothing
            raise CellError(cell.instance, f"provisioning could not begin: {exc}") from exc


def _drive(work: CellWork, cell: Cell, console: Console) -> None:
    state = work.read(work.state) or {}
    if state.get("failure") or state.get("brokers") is None:
        return
    address = without_userinfo(state["brokers"]["address"])
    console.print(f"[bold]cell {cell.instance}[/] {escape(cell.label)}  ({address})", highlight=False)
    if state.get("hosts_dir"):  # one generator per real host, meeting through the lake
        run_hosts(lake_path(state["hosts_dir"]), cell, PlacementPlan.from_dict(state["placement"]), console)
    else:
        drive_work(work, console)


def run_matrix(
    matrix: Matrix,
    lake_root: str,
    console: Console,
    only: Sequence[str] = (),
    run: RunInfo | None = None,
    phase_scale: float = 1.0,
) -> tuple[RunInfo, list[CellReport]]:
    """Every selected cell one at a time. `only` names cells by their matrix ids; `phase_scale` then scales
    their phases as Airflow's `phase_scale` param does (prepare_cell: a scaled cell is a new cell id)."""
    cells = select_cells(matrix, only)
    if phase_scale != 1.0:
        cells = [prepare_cell(c, phase_scale=phase_scale) for c in cells]
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
            console.print(f"[red]cell {cell.instance} failed:[/] {escape(str(reports[-1].reason))}", highlight=False)
    return run, reports
