"""The printed percentile table and its JSON twin.

Unsupported percentiles are shown as such, never as numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..core.analysis import CellAnalysis
from ..core.percentiles import PERCENTILES, LatencySummary
from ..core.saturation import describe as describe_harness
from ..spec.matrix_model import Cell
from .runner import CellReport

BASIS_LABEL = {"intended": "resp", "sent": "svc"}
UNSUPPORTED = "unsup."
LEGEND = (
    "ms. resp = response time, from the intended send time (what a user waits); svc = service time, "
    f"from the actual send. {UNSUPPORTED} = fewer than 1/(1-p) samples, so the percentile is not stated."
)


def format_ms(value_ns: float | None) -> str:
    """Milliseconds with precision fitted to the size, so a table stays narrow."""
    if value_ns is None:
        return UNSUPPORTED
    ms = value_ns / 1e6
    return f"{ms:.3f}" if ms < 10 else f"{ms:.2f}" if ms < 100 else f"{ms:.1f}"


def percentile_table(report: CellReport) -> Table:
    table = Table(
        title=f"{report.cell.id}  {report.cell.label}  [{report.status}]",
        title_justify="left",
        caption=LEGEND,
        caption_justify="left",
    )
    table.add_column("metric", style="bold", no_wrap=True)
    table.add_column("count", justify="right")
    for p in PERCENTILES:
        table.add_column(f"p{p}", justify="right")
    table.add_column("max", justify="right")
    if report.analysis is None:
        return table
    for metric, by_basis in report.analysis.metrics.items():
        for basis, summary in by_basis.items():
            table.add_row(f"{metric} {BASIS_LABEL[basis]}", *_cells(summary))
    table.add_row("send lag", *_cells(report.analysis.lag), style="dim")
    return table


def _cells(summary: LatencySummary) -> list[str]:
    if not summary.count:
        return ["0", *["-" for _ in PERCENTILES], "-"]
    return [
        str(summary.count),
        *(format_ms(summary.percentiles[p]) for p in PERCENTILES),
        format_ms(summary.max_ns),
    ]


def print_report(report: CellReport, console: Console) -> None:
    console.print(percentile_table(report))
    if report.analysis is not None:
        acc = report.analysis.accounting
        console.print(
            f"  measure phase: scheduled {acc.scheduled}  sent {acc.sent}  send errors {acc.send_errors}  "
            f"acknowledged {acc.acknowledged}  received {acc.received}  lost {acc.lost}  "
            f"duplicated {acc.duplicated}  acked-but-lost {acc.acknowledged_but_lost}",
            highlight=False,
        )
        a = report.analysis
        console.print(
            f"  generator: target {a.target_rate_per_s:g}/s  achieved {a.achieved_rate_per_s:.1f}/s",
            highlight=False,
        )
        if acc.relayed is not None:
            console.print(f"  chain: {acc.relayed} of {acc.sent} sent reached a relay", highlight=False)
        for line in describe_harness(report.harness):
            console.print(f"  harness {line}", highlight=False)
    for line in fault_lines(report.faults):
        console.print(f"  {line}", highlight=False)
    for name, bg in report.background.items():
        lag = bg["schedule_lag"]
        worst = lag["percentiles_ns"].get("99.9") or lag["max_ns"]
        console.print(
            f"  background {name} (unmeasured, all phases): scheduled {bg['scheduled']}  sent {bg['sent']}  "
            f"acknowledged {bg['acked']}  errors {bg['errors']}  consumed {bg['consumed']}"
            + (f" (by subscription {bg['consumed_per_subscription']})" if "consumed_per_subscription" in bg else "")
            + "  "
            f"send lag p99.9 {format_ms(worst)} ms max {format_ms(lag['max_ns'])} ms",
            highlight=False,
        )
    if report.reason:
        console.print(f"  [red]{report.reason}[/]", highlight=False)
    console.print(f"  data: {report.path}", highlight=False)


def fault_lines(faults: list[dict]) -> list[str]:
    """One line per fired fault: what hit which node when, the leader around it, recovery and loss."""
    lines = []
    for f in faults:
        if "fired_s" not in f:  # not analysed (the cell's analysis failed): what fired is still shown
            lines.append(f"fault {f['kind']} node {f.get('node')}")
            continue
        ended = "" if f["ended_s"] is None or f["ended_s"] == f["fired_s"] else f"-{f['ended_s']:.2f}s"
        first = f["first_arrival_after_s"]
        lines.append(
            f"fault {f['kind']} {f.get('target', 'leader')}=node {f.get('node')} at {f['fired_s']:.2f}s{ended}: "
            f"leader {f['leader_before']} -> {f['leader_after']}  first arrival after "
            f"{'never' if first is None else f'{first:.3f}s'}  longest gap {f['max_arrival_gap_s']:.3f}s  "
            f"lost {f['lost']} of {f['scheduled']}  acked-but-lost {f['acknowledged_but_lost']}" + _squeeze(f)
        )
    return lines


def _squeeze(fault: dict) -> str:
    """A bandwidth squeeze's rate and what its shaper counted (dropped, held back)."""
    if fault.get("rate_mbit") is None:
        return ""
    return (
        f"  at {fault['rate_mbit']:g} Mbit/s: shaper drops {fault.get('shaper_drops')} "
        f"overlimits {fault.get('shaper_overlimits')}"
    )


def report_json(report: CellReport) -> dict:
    out = report.to_dict()
    if report.analysis is not None:
        out["percentiles_ms"] = {
            metric: {basis: {"count": s.count, **s.as_ms()} for basis, s in by.items()}
            for metric, by in report.analysis.metrics.items()
        }
        out["schedule_lag_ms"] = {"count": report.analysis.lag.count, **report.analysis.lag.as_ms()}
    return out


def report_from_row(row: dict, path: Path | None = None) -> CellReport:
    """A landed cell's report rebuilt from its cells row, so the tables of a run can be printed again
    (Airflow's analysis tail) from exactly what was landed."""
    results = json.loads(row["results_json"] or "null")
    cell = Cell(
        id=row["cell_id"], series_key=row["series_key"], matrix=row["matrix"], spec=json.loads(row["spec_json"])
    )
    analysis = CellAnalysis.from_dict(results) if results else None
    return CellReport(cell, row["status"], row["reason"], analysis, path, json.loads(row["faults_json"] or "[]"))
