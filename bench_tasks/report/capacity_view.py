"""Capacity searches to look at: response time against offered rate (p50, p99, p99.9 on a log axis, each
objective's bound as a line, the capacity marked) and what arrived against what was offered, one pair of charts
per cell, with every step's figures in a table below: as a page of its own (`capacity.html` beside
`capacity.json`) and as a section of the run's report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from ..spec.capacity import Objective, parse_objective
from . import page
from .charts import CYCLE, to_svg

SHOWN = ("50", "99", "99.9")


def capacity_chart(result: dict[str, Any]) -> str:
    """The two charts of one cell's search, as inline SVG."""
    steps = [s for s in result["steps"] if s["percentiles_ms"]]
    objectives = [parse_objective(text) for text in result["objectives"]]
    metric = shown_metric(objectives, steps)
    fig = Figure(figsize=(9.5, 3.4))
    latency, throughput = fig.subplots(1, 2)
    rates = [s["rate_per_s"] for s in steps]
    for colour, p in zip(CYCLE, SHOWN, strict=False):
        values = [(s["percentiles_ms"].get(metric) or {}).get(p) for s in steps]
        kept = [(r, v) for r, v in zip(rates, values, strict=True) if v]
        if kept:
            latency.plot(*zip(*kept, strict=True), marker="o", color=colour, label=f"{metric} p{p}", gid=f"p{p}")
    for o in objectives:
        if not o.is_backlog:  # a backlog is messages, not time: its objective is judged in each step's `why`
            latency.axhline(o.bound / 1e6, color="black", linestyle="--", linewidth=1, label=o.text)
    capacity = result["capacity_per_s"]
    for axes in (latency, throughput):
        if capacity is not None:
            axes.axvline(capacity, color="#27ae60", linewidth=1.5, label=f"capacity {capacity:,.0f}/s")
        axes.set_xlabel("offered rate (msg/s)")
    latency.set_yscale("log")
    latency.set_ylabel("response time (ms, from intended send)")
    latency.legend(fontsize=7)
    offered = [s["rate_per_s"] for s in result["steps"]]
    throughput.plot(offered, offered, color="#5d6d7e", linestyle=":", label="offered")
    throughput.plot(
        offered,
        [s["received_rate_per_s"] for s in result["steps"]],
        marker="o",
        color=CYCLE[1],
        label="arrived in the measure phase",
        gid="arrived",
    )
    throughput.set_ylabel("msg/s")
    throughput.legend(fontsize=7)
    fig.suptitle(f"{result['label']}: {result['limit']} ({result['limit_why']})", fontsize=8)
    return to_svg(fig)


def shown_metric(objectives: Sequence[Objective], steps: Sequence[dict[str, Any]]) -> str:
    """The metric whose response times the chart shows: the first latency objective's, else (the objectives
    bound the backlog only, which counts messages) the first metric the steps measured."""
    latency = [o.metric for o in objectives if not o.is_backlog]
    if latency:
        return latency[0]
    return next((m for s in steps for m in s["percentiles_ms"]), "")


def capacity_page(run_id: str, results: Sequence[dict[str, Any]]) -> str:
    """The run's searches as one self-contained HTML page."""
    title = f"sixnines capacity — run {run_id}"
    return page.document(
        title, f"run {run_id} · {len(results)} search(es)", [("capacity", "Capacity")], capacity_section(results)
    )


def capacity_section(results: Sequence[dict[str, Any]]) -> str:
    """One block per searched cell: the answer in words, the charts, every step."""
    if not results:
        return ""
    blocks = []
    for r in results:
        held = "none held" if r["capacity_per_s"] is None else f"{r['capacity_per_s']:,.0f} msg/s"
        bound = "" if r["broker_bound"] or r["limit"] == "max-rate" else " — not the broker's capacity"
        words = f"capacity {held}; limit {r['limit']}: {r['limit_why']}{bound}"
        blocks.append(f"<h3>{page.esc(r['label'])}</h3>" + page.note(words) + page.chart(capacity_chart(r)))
        blocks.append(_steps_table(r["steps"]))
    return page.section("capacity", "Capacity at the objectives", "".join(blocks))


def _steps_table(steps: Sequence[dict[str, Any]]) -> str:
    headers = ("verdict", "why", "offered/s", "sent/s", "arrived/s")
    rows = [
        [
            s["verdict"],
            s["why"],
            f"{s['rate_per_s']:,.0f}",
            f"{s['achieved_rate_per_s']:,.0f}",
            f"{s['received_rate_per_s']:,.0f}",
        ]
        for s in steps
    ]
    return page.table(headers, rows, left=2)
