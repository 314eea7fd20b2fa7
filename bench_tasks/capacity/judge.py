"""What one step of a capacity search showed, from its landed cell: did the cell hold the offered rate and every
objective, and if not, what broke first.

The order of the checks is the order of trust. A cell the harness failed (it fell behind its schedule or a worker
saturated: `cell.landing._gate`) says nothing about the broker, so that comes first; then a cell that failed for
any other reason; then consumers that fell behind (fewer than `KEEP_UP` of the offered messages per second
arrived within the measure phase: the queue is growing, whatever the percentiles say yet); then loss beyond
what the workload allows; then the objectives."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..cell.landing import CellReport
from ..core.analysis import CellAnalysis, arrival_rate
from ..core.saturation import KEEP_UP
from ..spec.capacity import Objective
from .search import Step, Verdict

HARNESS_REASONS = ("harness saturated", "harness dropped", "generator fell behind its schedule")


def judge(report: CellReport, objectives: Sequence[Objective]) -> Step:
    rate = report.cell.spec.workload.rate_per_s
    analysis = report.analysis
    base = {"rate_per_s": rate, "cell_id": report.cell.id}
    if analysis is None:  # the cell ended before its analysis: only its reason can say whose fault it was
        return Step(**base, verdict=_failed_by(report), why=str(report.reason))
    facts = {
        "achieved_rate_per_s": round(analysis.achieved_rate_per_s, 1),
        "received_rate_per_s": round(received_rate(report, analysis), 1),
        "percentiles_ms": {m: analysis.metrics[m]["intended"].as_ms() for m in analysis.metrics},
    }
    if report.status != "ok":
        return Step(**base, **facts, verdict=_failed_by(report), why=str(report.reason))
    if facts["received_rate_per_s"] < KEEP_UP * rate:
        why = f"received {facts['received_rate_per_s']:,.0f}/s of {rate:,.0f}/s offered in the measure phase"
        return Step(**base, **facts, verdict="backlog", why=why)
    acc = analysis.accounting
    allowed = report.cell.spec.workload.allowed_loss_ratio * acc.scheduled
    if acc.lost + acc.send_errors > allowed:
        why = f"lost {acc.lost} and {acc.send_errors} send errors of {acc.scheduled} (allowed {allowed:g})"
        return Step(**base, **facts, verdict="loss", why=why)
    broken = [o for o in objectives if not o.holds(analysis)]
    if broken:
        return Step(**base, **facts, verdict="objective", why="; ".join(_broken(o, analysis) for o in broken))
    return Step(**base, **facts, verdict="pass", why="; ".join(_held(o, analysis) for o in objectives) or "held")


def _failed_by(report: CellReport) -> Verdict:
    """A failed cell's verdict: `harness` when its reason says the harness could not keep the schedule."""
    return "harness" if any(r in str(report.reason) for r in HARNESS_REASONS) else "failed"


def received_rate(report: CellReport, analysis: CellAnalysis) -> float:
    """Messages per second that arrived (received, or acknowledged for publish/rtt) within the measure phase."""
    phases = _phases(report)
    if phases is None:
        return 0.0
    window = (phases["measure_start_ns"], phases["measure_end_ns"])
    return arrival_rate(analysis, report.cell.spec.measurement, window)


def _phases(report: CellReport) -> dict | None:
    if report.path is None:
        return None
    result = report.path / "result.json"
    return json.loads(result.read_text()).get("phases") if result.exists() else None


def _broken(o: Objective, analysis: CellAnalysis) -> str:
    return f"{o.text} broken: {o.name} {o.shown(o.value(analysis))}"


def _held(o: Objective, analysis: CellAnalysis) -> str:
    return f"{o.name} {o.shown(o.value(analysis))}"
