"""Run cells one at a time: provision the broker, drive the cell, analyse, land, tear down.

A failed cell never stops the sweep and never hides: its row says `failed` with the reason, whatever
samples it produced are still landed, and the run exits non-zero.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from .analysis import CellAnalysis, analyze, leaders_at
from .cell_runner import CellRun, Fault, check_cpus, drive_cell
from .context import harness_context
from .errors import CellError, SixninesError
from .hdr import write_hlog
from .lake import Lake, RunInfo, write_json
from .matrix import Cell, Matrix, NatsCell, cell_id, series_key
from .paths import cache_dir
from .provision import Provisioned, provision
from .records import RECEIVED_SCHEMA, SCHEMA_VERSION, SENT_SCHEMA, write_parquet
from .systems import resolve_version


@dataclass
class CellReport:
    cell: Cell
    status: str  # ok | failed
    reason: str | None
    analysis: CellAnalysis | None
    path: Path | None
    faults: list[dict]

    def to_dict(self) -> dict:
        return {
            "cell_id": self.cell.id,
            "series_key": self.cell.series_key,
            "label": self.cell.label,
            "status": self.status,
            "reason": self.reason,
            "path": None if self.path is None else str(self.path),
            "faults": self.faults,
            "spec": self.cell.spec.model_dump(mode="json"),
            **(self.analysis.to_dict() if self.analysis else {}),
        }


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


def acked_metric(cell: Cell) -> str | None:
    """What an acknowledgement means in this cell: a JetStream PubAck or Kafka delivery report ('publish'),
    an rtt reply, or nothing (core NATS publish)."""
    spec = cell.spec
    if spec.measurement == "rtt":
        return "rtt"
    if isinstance(spec, NatsCell) and spec.broker.mode == "core":
        return None
    return "publish"


def run_cell(
    cell: Cell,
    lake: Lake,
    run: RunInfo,
    console: Console,
    faults: Sequence[Fault] = (),
    gate_lag: bool = True,
) -> CellReport:
    spec = cell.spec
    started = dt.datetime.now(dt.UTC).isoformat()
    staging = lake.staging_dir(run, cell.id)
    broker_dir = cache_dir() / "runs" / run.run_id / cell.id
    brokers: Provisioned | None = None
    broker_context: dict = {}
    cell_run: CellRun | None = None
    status, reason = "ok", None
    try:
        check_cpus(cell)
        brokers = provision(cell, broker_dir)
        broker_context = brokers.context()
        if spec.workload.cpus.broker:
            for pid in brokers.pids():
                os.sched_setaffinity(pid, spec.workload.cpus.broker)
        console.print(f"[bold]cell {cell.id}[/] {cell.label}  ({brokers.address})", highlight=False)
        brokers.watch_leaders()
        cell_run = drive_cell(cell, brokers.address, staging, brokers, console, faults)
    except CellError as exc:
        status, reason = "failed", str(exc)
        cell_run = exc.partial_run  # type: ignore[assignment]
    except Exception as exc:  # a failed cell is a result of the run, never a crash of the sweep
        status, reason = "failed", _describe(cell, exc)
    finally:
        if brokers is not None:
            try:
                _teardown(brokers, staging, broker_context)
            except Exception as exc:
                if status == "ok":
                    status, reason = "failed", f"teardown: {_describe(cell, exc)}"
        shutil.rmtree(broker_dir, ignore_errors=True)

    analysis = None
    try:
        _attribute_leaders(staging, broker_context.get("leader_changes", []))
        if cell_run is not None:
            analysis = _analyse(cell, staging, cell_run)
            if status == "ok":
                status, reason = _gate(cell, analysis, gate_lag)
            series = {
                f"{m}-{b}": (s.at_ns, getattr(s, f"from_{b}_ns"))
                for m, s in analysis.series.items()
                for b in ("intended", "sent")
            }
            write_hlog(staging / "cell.hlog", series, cell_run.plan.t0_ns, cell_run.wall_t0_s)
    except Exception as exc:  # the raw samples are still landed below, so the analysis can be redone
        status, reason = "failed", f"analysis: {_describe(cell, exc)}"
    context = {
        **harness_context(),
        "broker": broker_context,
        "cpu_placement": spec.workload.cpus.model_dump(),
    }
    report = CellReport(cell, status, reason, analysis, None, cell_run.faults_dicts() if cell_run else [])
    write_json(
        staging / "result.json",
        {
            **report.to_dict(),
            "context": context,
            "run_id": run.run_id,
            "phases": cell_run.plan.to_dict() if cell_run else None,
            "lagging_consumed": cell_run.lagging_consumed if cell_run else None,
            "background": cell_run.background if cell_run else None,
        },
    )
    report.path = lake.commit_cell(run, cell.id, staging)
    lake.upsert_cell_row(run, _cell_row(report, run, cell_run, context, started))
    return report


def _describe(cell: Cell, exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, SixninesError) else f"{type(exc).__name__}: {exc}"
    return text if cell.id in text else f"cell {cell.id}: {text}"


def _teardown(brokers: Provisioned, staging: Path, broker_context: dict) -> None:
    """Stop the brokers (leaving no process), then keep their logs and leader timeline with the cell."""
    try:
        brokers.stop()
    finally:
        broker_context["leader_changes"] = brokers.leader_changes()
        logs = [log for log in brokers.logs() if log.exists()]
        for log in logs:  # the broker's own account of the cell, kept with its data
            shutil.copy(log, staging / ("broker.log" if len(logs) == 1 else f"broker-{log.parent.name}.log"))


def _attribute_leaders(staging: Path, changes: list[dict[str, int]]) -> None:
    """Fill each received sample's `leader` from the cell's leader timeline (Kafka, NATS cluster), before landing."""
    if not changes:
        return
    for path in sorted(staging.glob("received-c*.parquet")):
        table = pq.read_table(path)
        partition = table["partition"].fill_null(-1).to_numpy()
        leader = leaders_at(partition, table["received_ns"].to_numpy(), changes)
        column = pa.array(leader, mask=leader < 0)
        write_parquet(table.set_column(table.schema.get_field_index("leader"), "leader", column), path)


def _analyse(cell: Cell, staging: Path, cell_run: CellRun) -> CellAnalysis:
    sent = _read_parts(staging, "sent-p*.parquet", SENT_SCHEMA)
    received = _read_parts(staging, "received-c*.parquet", RECEIVED_SCHEMA)
    relayed = _read_parts(staging, "relayed-r*.parquet", RECEIVED_SCHEMA) if cell.spec.measurement == "chain" else None
    plan = cell_run.plan
    return analyze(
        sent,
        received,
        cell.spec.measurement,
        acked_metric(cell),
        (plan.measure_start_ns, plan.measure_end_ns),
        cell.spec.workload.rate_per_s,
        relayed,
    )


def _read_parts(folder: Path, pattern: str, schema: pa.Schema) -> pa.Table:
    parts = [pq.read_table(p) for p in sorted(folder.glob(pattern))]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _gate(cell: Cell, analysis: CellAnalysis, gate_lag: bool) -> tuple[str, str | None]:
    """Fail a cell whose generator could not keep its schedule: its numbers describe the harness.

    rtt is exempt: a synchronous connection waits for the previous reply, so its lag is the system's."""
    w = cell.spec.workload
    lag = analysis.lag.percentiles.get("99.9")
    if lag is None:
        lag = analysis.lag.max_ns
    if gate_lag and cell.spec.measurement != "rtt" and lag is not None and lag > w.max_schedule_lag_ms * 1e6:
        return "failed", (
            f"generator fell behind its schedule: lag p99.9 {lag / 1e6:.2f} ms exceeds "
            f"max_schedule_lag_ms={w.max_schedule_lag_ms}"
        )
    if analysis.accounting.scheduled == 0:
        return "failed", "no message was scheduled in the measure phase"
    return "ok", None


def _cell_row(report: CellReport, run: RunInfo, cell_run: CellRun | None, context: dict, started: str) -> dict:
    spec = report.cell.spec
    acc = report.analysis.accounting if report.analysis else None
    phases = cell_run.plan.to_dict() if cell_run else {}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run.run_id,
        "run_date": run.run_date,
        "matrix": report.cell.matrix,
        "cell_id": report.cell.id,
        "series_key": report.cell.series_key,
        "system": spec.system,
        "version": spec.version,
        "measurement": spec.measurement,
        "label": report.cell.label,
        "status": report.status,
        "reason": report.reason,
        "started_at": started,
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        **{k: phases.get(k) for k in ("t0_ns", "measure_start_ns", "measure_end_ns", "end_ns")},
        **{
            k: getattr(acc, k) if acc else None
            for k in ("scheduled", "sent", "acknowledged", "received", "lost", "duplicated")
        },
        "spec_json": spec.model_dump_json(),
        "context_json": json.dumps(context, default=str),
        "results_json": json.dumps(report.analysis.to_dict() if report.analysis else None),
        "faults_json": json.dumps(report.faults),
    }


def run_matrix(
    matrix: Matrix, lake_root: Path, console: Console, only: Sequence[str] = (), run: RunInfo | None = None
) -> tuple[RunInfo, list[CellReport]]:
    cells = select_cells(matrix, only)
    run = run or RunInfo.new()
    lake = Lake(lake_root)
    console.print(
        f"run {run.run_id}: {len(cells)} cell(s) of matrix '{matrix.name}' → {lake.run_dir(run)}",
        highlight=False,
    )
    reports = []
    for index, cell in enumerate(cells, 1):
        console.rule(f"cell {index}/{len(cells)}")
        reports.append(run_cell(cell, lake, run, console))
        if reports[-1].status != "ok":
            console.print(f"[red]cell {cell.id} failed:[/] {reports[-1].reason}", highlight=False)
    return run, reports
