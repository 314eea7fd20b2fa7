"""Landing a driven cell: leader attribution, analysis, the harness gates (send lag, saturation), hlog,
result.json, the atomic commit and the cells row.

One function for both ways a cell runs (the CLI's single process and Airflow's `land` task), so a cell
lands identically whoever drove it. A re-run replaces the cell's folder and its row, never adds to them.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..core.analysis import CellAnalysis, analyze, arrival_rate, leaders_at
from ..core.faultcost import fault_costs
from ..core.hdr import write_hlog
from ..core.saturation import HARNESS_FACTS_VERSION, fell_behind, verdict
from ..errors import SixninesError
from ..lake.layout import Lake, RunInfo, write_json
from ..lake.records import RECEIVED_SCHEMA, SCHEMA_VERSION, SENT_SCHEMA, write_parquet
from ..secrecy import recorded_model, scrub_text, scrubbed
from ..spec.leader import leader_node
from ..spec.matrix_model import Cell
from ..systems import system_of
from .context import harness_context
from .drive import CellRun


@dataclass
class CellReport:
    cell: Cell
    status: str  # ok | failed
    reason: str | None
    analysis: CellAnalysis | None
    path: Path | None
    faults: list[dict]
    background: dict[str, dict] = field(default_factory=dict)  # per background workload: counts, send lag
    harness: dict[str, dict] = field(default_factory=dict)  # per worker: its measure-phase self-view (saturation)

    def to_dict(self) -> dict:
        return {
            "cell_id": self.cell.id,
            "series_key": self.cell.series_key,
            "repeat": self.cell.repeat,
            "repeats": self.cell.repeats,
            "label": self.cell.label,
            "status": self.status,
            "reason": self.reason,
            "path": None if self.path is None else str(self.path),
            "faults": self.faults,
            "background": self.background,
            "harness": harness_facts(self.harness),
            "spec": recorded_model(self.cell.spec),
            **({"origin": self.cell.origin} if self.cell.origin else {}),
            **(self.analysis.to_dict() if self.analysis else {}),
        }


def acked_metric(cell: Cell) -> str | None:
    """What an acknowledgement means in this cell: the broker's ack of a send ('publish'), an rtt reply, or
    nothing (a broker that does not acknowledge sends, asked of the cell's system)."""
    return system_of(cell.spec).acked_metric(cell.spec.model_dump(mode="json"))


def describe(cell: Cell, exc: BaseException) -> str:
    """An error as one line that names the cell."""
    text = str(exc) if isinstance(exc, SixninesError) else f"{type(exc).__name__}: {exc}"
    text = scrub_text(text)  # a client library's message may quote a server URL, a config line, a password
    return text if cell.id in text else f"cell {cell.instance}: {text}"


def keep_broker_logs(logs: list[Path], staging: Path) -> None:
    """The broker's own account of the cell, kept with its data."""
    present = [log for log in logs if log.exists()]
    for log in present:
        shutil.copy(log, staging / ("broker.log" if len(present) == 1 else f"broker-{log.parent.name}.log"))


def land_cell(
    cell: Cell,
    lake: Lake,
    run: RunInfo,
    staging: Path,
    cell_run: CellRun | None,
    broker_context: dict,
    status: str,
    reason: str | None,
    started: str,
    gate_lag: bool = True,
    hosts: dict | None = None,
    overhead: dict[str, float] | None = None,
) -> CellReport:
    """Analyse what the generator wrote to `staging`, gate it, and commit it with its row.

    `status`/`reason` say how driving went; analysis can only turn `ok` into `failed`. The raw samples are
    landed even when the analysis fails, so it can be redone."""
    spec = cell.spec
    analysis = None
    faults = cell_run.faults_dicts() if cell_run else []
    try:
        _attribute_leaders(staging, broker_context.get("leader_changes", []))
        if cell_run is not None:
            analysis, faults = _analyse(cell, staging, cell_run, broker_context.get("leader_changes", []))
            moved = _placed_leader_moved(cell, cell_run, broker_context.get("leader_changes", []))
            if status == "ok" and moved is not None:
                status, reason = "failed", moved
            if status == "ok":
                window = (cell_run.plan.measure_start_ns, cell_run.plan.measure_end_ns)
                status, reason = _gate(cell, analysis, gate_lag, cell_run.harness, window)
            series = {
                f"{m}-{b}": (s.at_ns, getattr(s, f"from_{b}_ns"))
                for m, s in analysis.series.items()
                for b in ("intended", "sent")
            }
            write_hlog(staging / "cell.hlog", series, cell_run.plan.t0_ns, cell_run.wall_t0_s)
    except Exception as exc:
        status, reason = "failed", f"analysis: {describe(cell, exc)}"
    context = {
        **harness_context(),
        "broker": broker_context,
        "cpu_placement": spec.workload.cpus.model_dump(),
        **({"release": cell.release} if cell.release else {}),  # how `latest` or a line became this release
    }
    if hosts is not None:  # only cells placed on hosts: other cells' context stays as it was
        context["hosts"] = hosts
    report = CellReport(
        cell,
        status,
        reason,
        analysis,
        None,
        faults,
        cell_run.background if cell_run else {},
        cell_run.harness if cell_run else {},
    )
    write_json(
        staging / "result.json",
        {
            **report.to_dict(),
            "context": context,
            "run_id": run.run_id,
            "phases": cell_run.plan.to_dict() if cell_run else None,
            "lagging_consumed": cell_run.lagging_consumed if cell_run else None,
            "overhead": overhead,
        },
    )
    report.path = lake.commit_cell(run, cell.id, staging, cell.lake_repeat)
    lake.upsert_cell_row(run, scrubbed(_cell_row(report, run, cell_run, context, started)))
    return report


def _placed_leader_moved(cell: Cell, cell_run: CellRun, changes: list[dict[str, int]]) -> str | None:
    """A cell with `broker.leader: node:N` whose measured partition was not led by N when the measure phase began
    (placement was verified before the warmup; the leader timeline says whether it held): why it fails."""
    node = leader_node(getattr(cell.spec.broker, "leader", None))
    if node is None:
        return None
    led = int(leaders_at(np.zeros(1, dtype=np.int32), np.array([cell_run.plan.measure_start_ns]), changes)[0])
    if led == node:
        return None
    actual = f"node {led}" if led >= 0 else "no known node"
    return f"broker.leader node:{node}: partition 0 was led by {actual} when the measure phase started"


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


def _analyse(
    cell: Cell, staging: Path, cell_run: CellRun, leader_changes: list[dict[str, int]]
) -> tuple[CellAnalysis, list[dict]]:
    """The cell's analysis, and each fired fault with what it cost (`faultcost`)."""
    sent = _read_parts(staging, "sent-p*.parquet", SENT_SCHEMA)
    received = _read_parts(staging, "received-c*.parquet", RECEIVED_SCHEMA)
    relayed = _read_parts(staging, "relayed-r*.parquet", RECEIVED_SCHEMA) if cell.spec.measurement == "chain" else None
    plan = cell_run.plan
    window = (plan.measure_start_ns, plan.measure_end_ns)
    analysis = analyze(
        sent, received, cell.spec.measurement, acked_metric(cell), window, cell.spec.workload.rate_per_s, relayed
    )
    faults = fault_costs(cell_run.faults_dicts(), sent, received, cell.spec.measurement, window, leader_changes)
    return analysis, faults


def _read_parts(folder: Path, pattern: str, schema: pa.Schema) -> pa.Table:
    parts = [pq.read_table(p) for p in sorted(folder.glob(pattern))]
    return pa.concat_tables(parts) if parts else schema.empty_table()


# Workers whose saturation fails a cell: the measured path. Lagging and background consumers are recorded only
# (a lagging consumer's backlog is the point of it).
GATED_ROLES = ("producer", "consumer", "relay", "responder")


def harness_facts(workers: dict[str, dict]) -> dict:
    """The cell's record of its own harness (schema in `saturation.HARNESS_FACTS_VERSION`)."""
    return {"schema_version": HARNESS_FACTS_VERSION, "workers": workers}


def _gate(
    cell: Cell, analysis: CellAnalysis, gate_lag: bool, harness: dict[str, dict], window: tuple[int, int]
) -> tuple[str, str | None]:
    """Fail a cell whose harness was the bottleneck: its numbers describe the harness, not the system. The
    generator fell behind its schedule (send lag; rtt is exempt: a synchronous connection waits for the
    previous reply, so its lag is the system's), a worker saturated (`saturation.verdict`), or a busy receiving
    worker took fewer messages than were offered (`saturation.fell_behind`); every reason that applies is given."""
    w = cell.spec.workload
    reasons = []
    lag = analysis.lag.percentiles.get("99.9")
    if lag is None:
        lag = analysis.lag.max_ns
    if gate_lag and cell.spec.measurement != "rtt" and lag is not None and lag > w.max_schedule_lag_ms * 1e6:
        reasons.append(
            f"generator fell behind its schedule: lag p99.9 {lag / 1e6:.2f} ms exceeds "
            f"max_schedule_lag_ms={w.max_schedule_lag_ms}"
        )
    gated = [name for name, facts in harness.items() if facts.get("role") in GATED_ROLES]
    reasons += verdict(harness, w.max_schedule_lag_ms, gated, window[0])
    if not reasons and gate_lag:  # a cell that delays its schedule on purpose falls behind on purpose
        arrived = arrival_rate(analysis, cell.spec.measurement, window)
        reasons += fell_behind(harness, _receivers(cell, harness), arrived, w.rate_per_s)
    if reasons:
        return "failed", "; ".join(reasons)
    if analysis.accounting.scheduled == 0:
        return "failed", "no message was scheduled in the measure phase"
    return "ok", None


def _receivers(cell: Cell, harness: dict[str, dict]) -> list[str]:
    """The workers that take the measured messages: consumers and relays; for publish and rtt the producers,
    which take the acknowledgements and replies (and rtt's responders, which take the requests)."""
    roles = {"consumer", "relay"} if cell.spec.measurement in ("e2e", "chain") else {"producer", "responder"}
    return [name for name, facts in harness.items() if facts.get("role") in roles]


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
        "repeat": report.cell.repeat,
        "repeats": report.cell.repeats,
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
        "acked_metric": acked_metric(report.cell),
        "delivery_guaranteed": system_of(spec).delivery_guaranteed(spec.model_dump(mode="json")),
        "durable_acks": system_of(spec).promises_no_acknowledged_loss(spec.model_dump(mode="json")),
        "spec_json": json.dumps(recorded_model(spec), separators=(",", ":"), ensure_ascii=False),
        "context_json": json.dumps(context, default=str),
        "results_json": json.dumps(
            {**report.analysis.to_dict(), "harness": harness_facts(report.harness)} if report.analysis else None
        ),
        "faults_json": json.dumps(report.faults),
    }


def cell_overhead(started_at: str, cell_run: CellRun | None, now_s: float | None = None) -> dict[str, float] | None:
    """A cell's wall time beyond its phases, in two parts (wall clocks, so the steps may run in different
    processes or tasks): `before_t0_s`, from provisioning's start to the first intended send (brokers up, workers
    started and ready); `after_end_s`, from the schedule's end to the start of landing (drain, workers stopped,
    the phase watchers, the scheduler's gap between tasks). Landing's own analysis is not in it. `workers_ready_s`
    is the part of `before_t0_s` spent from asking for the workers until every one was ready."""
    if cell_run is None:
        return None
    started = dt.datetime.fromisoformat(started_at).timestamp()
    plan = cell_run.plan
    end_s = cell_run.wall_t0_s + (plan.end_ns - plan.t0_ns) / 1e9
    before, after = cell_run.wall_t0_s - started, (time.time() if now_s is None else now_s) - end_s
    parts = {"before_t0_s": round(before, 3), "after_end_s": round(after, 3), "total_s": round(before + after, 3)}
    return parts if cell_run.workers_ready_s is None else {**parts, "workers_ready_s": cell_run.workers_ready_s}
