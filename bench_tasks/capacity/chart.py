"""A capacity search as a page to look at: response time against offered rate (p50, p99, p99.9 on a log axis,
each objective's bound as a line, the capacity marked) and what arrived against what was offered, one pair of
charts per cell, with every step's figures in a table below (`capacity.html` beside `capacity.json`)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure

from ..report.charts import CYCLE, to_svg
from ..spec.capacity import parse_objective

SHOWN = ("50", "99", "99.9")


def capacity_chart(result: dict[str, Any]) -> str:
    """The two charts of one cell's search, as inline SVG."""
    steps = [s for s in result["steps"] if s["percentiles_ms"]]
    objectives = [parse_objective(text) for text in result["objectives"]]
    metric = objectives[0].metric if objectives else ""
    fig = Figure(figsize=(9.5, 3.4))
    latency, throughput = fig.subplots(1, 2)
    rates = [s["rate_per_s"] for s in steps]
    for colour, p in zip(CYCLE, SHOWN, strict=False):
        values = [(s["percentiles_ms"].get(metric) or {}).get(p) for s in steps]
        kept = [(r, v) for r, v in zip(rates, values, strict=True) if v]
        if kept:
            latency.plot(*zip(*kept, strict=True), marker="o", color=colour, label=f"{metric} p{p}", gid=f"p{p}")
    for o in objectives:
        latency.axhline(o.bound_ns / 1e6, color="black", linestyle="--", linewidth=1, label=o.text)
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


def capacity_page(run_id: str, results: Sequence[dict[str, Any]]) -> str:
    """The run's searches as one self-contained HTML page."""
    parts = [f"<h1>Capacity search {html.escape(run_id)}</h1>"]
    for r in results:
        held = "none held" if r["capacity_per_s"] is None else f"{r['capacity_per_s']:,.0f} msg/s"
        bound = "" if r["broker_bound"] or r["limit"] == "max-rate" else " — <b>not the broker's capacity</b>"
        parts += [
            f"<h2>{html.escape(r['label'])}</h2>",
            f"<p>capacity {held}; limit {html.escape(r['limit'])}: {html.escape(r['limit_why'])}{bound}</p>",
            capacity_chart(r),
            _steps_table(r["steps"]),
        ]
    style = "body{font-family:sans-serif;max-width:1100px;margin:auto}td,th{padding:2px 8px;text-align:right}"
    style += "td:last-child,th:last-child{text-align:left}"
    head = f"<head><meta charset='utf-8'><title>capacity {html.escape(run_id)}</title><style>{style}</style></head>"
    return f"<!doctype html><html>{head}<body>{''.join(parts)}</body></html>"


def _steps_table(steps: Sequence[dict[str, Any]]) -> str:
    head = "<tr><th>offered/s</th><th>sent/s</th><th>arrived/s</th><th>verdict</th><th>why</th></tr>"
    rows = "".join(
        f"<tr><td>{s['rate_per_s']:,.0f}</td><td>{s['achieved_rate_per_s']:,.0f}</td>"
        f"<td>{s['received_rate_per_s']:,.0f}</td><td>{s['verdict']}</td>"
        f"<td>{html.escape(s['why'])}</td></tr>"
        for s in steps
    )
    return f"<table>{head}{rows}</table>"
