"""One cell's page section: its charts (spectrum, chronological scatter, histogram) and its tables.

Every number comes from the analysis recomputed from the raw samples (data.py) or from result.json's record
of the run (accounting by landing, generator health, faults, context); nothing is averaged.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..core.analysis import Series
from ..core.percentiles import PERCENTILES, LatencySummary
from . import page
from .charts import BASIS_STYLE, Curve, Marker, Points, histogram_chart, scatter_chart, spectrum_chart
from .data import CellData
from .spectrum import Spectrum, landed_spectrum, spectrum

UNSUPPORTED = "unsup."
BASES = ("intended", "sent")


def anchor(cell: CellData) -> str:
    return f"cell-{cell.key.instance}"


def pruned_note(cell: CellData) -> str:
    return page.note(
        f"the raw samples of cell {cell.key.cell_id} were pruned ({cell.samples_pruned}): its spectra are drawn "
        "through the exact percentiles landing recorded, and the per-sample scatter and histogram are gone; its "
        "numbers are as landed and its HdrHistogram log (cell.hlog) remains"
    )


def spectrum_of(cell: CellData, metric: str, basis: str) -> Spectrum:
    """The cell's measure-phase spectrum: from every sample, or through its landed percentiles once pruned."""
    assert cell.analysis is not None
    if cell.samples_pruned:
        return landed_spectrum(cell.analysis.metrics[metric][basis])
    return spectrum(measure_values(cell, metric, basis))


def measure_values(cell: CellData, metric: str, basis: str) -> np.ndarray:
    """The measure-phase latencies (ns) of one metric and basis: the samples the tables summarize."""
    assert cell.analysis is not None
    phases = cell.result["phases"]
    s: Series = cell.analysis.series[metric]
    keep = (s.at_ns >= phases["measure_start_ns"]) & (s.at_ns < phases["measure_end_ns"])
    return getattr(s, f"from_{basis}_ns")[keep]


def ms(value_ns: float | None) -> str | tuple[str, str]:
    if value_ns is None:
        return (UNSUPPORTED, "unsup")
    v = value_ns / 1e6
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 100 else f"{v:.1f}"


def summary_row(name: str, s: LatencySummary) -> list[Any]:
    if not s.count:
        return [name, 0, *("-" for _ in PERCENTILES), "-"]
    return [name, f"{s.count:,}", *(ms(s.percentiles[p]) for p in PERCENTILES), ms(s.max_ns)]


def percentile_table(cell: CellData) -> str:
    assert cell.analysis is not None
    rows = [
        summary_row(f"{metric} {BASIS_STYLE[basis][0]}", summary)
        for metric, by_basis in cell.analysis.metrics.items()
        for basis, summary in by_basis.items()
    ]
    rows.append(summary_row("send lag (actual − intended)", cell.analysis.lag))
    return page.table(
        ("series (measure phase)", "count", *(f"p{p}" for p in PERCENTILES), "max"),
        rows,
        caption="milliseconds, exact over raw samples; unsup. = fewer than 1/(1−p) samples, so not stated",
    )


def accounting_table(cell: CellData) -> str:
    assert cell.analysis is not None
    measure, everything = cell.analysis.accounting.to_dict(), cell.analysis.accounting_all_phases.to_dict()
    rows = [(k.replace("_", " "), measure[k], everything[k]) for k in measure if measure[k] is not None]
    return page.table(("messages", "measure phase", "all phases"), rows)


def generator_table(cell: CellData) -> str:
    assert cell.analysis is not None
    a = cell.analysis
    lag = a.lag
    worst = lag.percentiles.get("99.9")
    rows = [
        ("target rate (/s)", f"{a.target_rate_per_s:g}"),
        ("achieved rate (/s, measure)", f"{a.achieved_rate_per_s:.1f}"),
        ("schedule lag p99.9 (ms)", ms(worst)),
        ("schedule lag max (ms)", ms(lag.max_ns)),
        ("lag limit max_schedule_lag_ms", (cell.key.spec.get("workload") or {}).get("max_schedule_lag_ms")),
    ]
    if cell.result.get("lagging_consumed"):
        rows.append(("read by unmeasured lagging consumers", cell.result["lagging_consumed"]))
    return page.table(("generator health", "value"), rows)


def background_table(cell: CellData) -> str:
    background = cell.result.get("background") or {}
    if not background:
        return ""
    rows = []
    for name, bg in background.items():
        lag = bg.get("schedule_lag") or {}
        pct = lag.get("percentiles_ns") or {}
        rows.append(
            [
                name,
                bg.get("scheduled"),
                bg.get("sent"),
                bg.get("acked"),
                bg.get("errors"),
                bg.get("consumed"),
                ms(pct.get("99.9")),
                ms(lag.get("max_ns")),
            ]
        )
    headers = ("workload", "scheduled", "sent", "acknowledged", "errors", "consumed", "lag p99.9 ms", "lag max ms")
    return "<h3>Background traffic (unmeasured, all phases)</h3>" + page.table(headers, rows)


def context_table(cell: CellData) -> str:
    ctx = cell.result.get("context") or {}
    broker = ctx.get("broker") or {}
    spec = cell.key.spec
    pairs: list[tuple[str, Any]] = [
        ("system / version (spec)", f"{spec.get('system')} {spec.get('version')}"),
        ("broker version (as reported)", broker.get("version")),
        ("broker settings (spec)", spec.get("broker")),
        ("client settings (spec)", spec.get("client")),
        ("client libraries", ctx.get("clients")),
        ("harness git sha", ctx.get("harness_git_sha")),
        ("cpu placement", ctx.get("cpu_placement")),
        *((f"host {k}", v) for k, v in (ctx.get("host") or {}).items()),
    ]
    pairs += hosts_rows(ctx.get("hosts"))
    config = broker.get("config")
    extra = f"<details><summary>broker config</summary><pre>{page.esc(config)}</pre></details>" if config else ""
    spec_json = json.dumps(spec, indent=2, sort_keys=True)
    return (
        page.key_values(pairs)
        + extra
        + f"<details><summary>cell spec</summary><pre>{page.esc(spec_json)}</pre></details>"
    )


def hosts_rows(hosts: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """Where a placed cell ran: hosts and their clock domains, the cap, link counters, and any clock offset
    between domains (one-way samples across domains are shown uncorrected, so the offset is stated beside them)."""
    if not hosts:
        return []
    offsets = [
        f"{o['to_host']} − {o['from_host']}: {o['offset_ns'] / 1e6:+.3f} ms ± {o['uncertainty_ns'] / 1e6:.3f} ms "
        f"({o['exchanges']} exchanges; one-way samples across these hosts are not corrected by it)"
        for o in hosts.get("clock_offsets") or []
    ]
    return [
        ("placement", hosts.get("placement")),
        ("hosts", hosts.get("hosts")),
        ("clocks", hosts.get("clock")),
        *(("measured clock offset", text) for text in offsets),
        ("network cap", hosts.get("network") or "none"),
        ("link counters", hosts.get("link_stats")),
    ]


def markers(cell: CellData) -> list[Marker]:
    """Faults (monotonic ns in result.json) and leader changes (the broker context's timeline) as seconds
    since t0. A partition's first leader is where the timeline starts, not a change, so it is not marked."""
    t0 = cell.t0_ns or 0
    out = []
    for f in cell.result.get("faults") or []:
        start, end = f.get("start_ns"), f.get("end_ns")
        if start is None:
            continue
        span = f" {(end - start) / 1e9:.2f} s" if end else ""
        node = "" if f.get("node") is None else f" node {f['node']}"
        out.append(
            Marker(
                (start - t0) / 1e9,
                f"{f.get('kind', 'fault')}{node}{span}",
                "#7d3c98",
                None if end is None else (end - t0) / 1e9,
            )
        )
    seen: dict[Any, Any] = {}
    changes = ((cell.result.get("context") or {}).get("broker") or {}).get("leader_changes") or []
    for c in sorted(changes, key=lambda c: c.get("at_ns", 0)):
        p = c.get("partition")
        if p in seen and seen[p] != c.get("leader"):
            out.append(Marker((c["at_ns"] - t0) / 1e9, f"p{p} leader {seen[p]} → {c.get('leader')}", "#d68910"))
        seen[p] = c.get("leader")
    return out


def phases_s(cell: CellData) -> list[tuple[str, float, float]]:
    ph = cell.result["phases"]
    t0 = ph["t0_ns"]
    return [
        ("warmup", 0.0, (ph["measure_start_ns"] - t0) / 1e9),
        ("measure", (ph["measure_start_ns"] - t0) / 1e9, (ph["measure_end_ns"] - t0) / 1e9),
        ("cooldown", (ph["measure_end_ns"] - t0) / 1e9, (ph["end_ns"] - t0) / 1e9),
    ]


def metric_charts(cell: CellData, metric: str) -> str:
    """The three views of one metric: spectrum (measure phase), scatter (all phases), histogram (measure)."""
    assert cell.analysis is not None
    cid, t0 = cell.key.instance, cell.t0_ns or 0
    curves = [
        Curve(
            BASIS_STYLE[b][0],
            f"spectrum-{cid}-{metric}-{b}",
            spectrum_of(cell, metric, b),
            BASIS_STYLE[b][1],
            dashed=b == "sent",
        )
        for b in BASES
    ]
    title = f"{metric}: percentile spectrum, measure phase — {cell.key.title}"
    if cell.samples_pruned:
        return page.chart(spectrum_chart(title, curves)) + pruned_note(cell)
    s = cell.analysis.series[metric]
    at_s = (s.at_ns - t0) / 1e9
    everything = [
        Points(BASIS_STYLE[b][0], f"scatter-{cid}-{metric}-{b}", at_s, getattr(s, f"from_{b}_ns"), BASIS_STYLE[b][1])
        for b in ("sent", "intended")
    ]
    measured = [
        Points(
            BASIS_STYLE[b][0],
            f"histogram-{cid}-{metric}-{b}",
            np.array([]),
            measure_values(cell, metric, b),
            BASIS_STYLE[b][1],
        )
        for b in BASES
    ]
    return (
        page.chart(spectrum_chart(title, curves))
        + page.chart(
            scatter_chart(
                f"{metric}: every sample by intended send time — {cell.key.title}",
                everything,
                phases_s(cell),
                markers(cell),
            )
        )
        + page.chart(histogram_chart(f"{metric}: latency histogram, measure phase — {cell.key.title}", measured))
    )


# A fault's record as landing wrote it (`core.faultcost`), in the order the per-fault table shows it.
FAULT_COST_FIELDS = (
    ("kind", "action"),
    ("target", "target"),
    ("node", "node"),
    ("fired_s", "fired (s)"),
    ("ended_s", "ended (s)"),
    ("leader_before", "leader before"),
    ("leader_after", "leader after"),
    ("first_arrival_after_s", "first arrival after (s)"),
    ("max_arrival_gap_s", "longest gap (s)"),
    ("p99_recovery_s", "p99 back after (s)"),
    ("p99_band_ms", "back within p99 (ms)"),
    ("scheduled", "scheduled"),
    ("lost", "lost"),
    ("duplicated", "duplicated"),
    ("acknowledged_but_lost", "acked but lost"),
)


SQUEEZE_FIELDS = (
    ("rate_mbit", "squeezed to Mbit/s"),
    ("shaper_drops", "shaper drops"),
    ("shaper_overlimits", "shaper overlimits"),
)


def fault_costs_records(cell: CellData) -> list[dict[str, Any]]:
    """Per fault, what it cost (times from the measure phase's start); none for faults landed without it."""
    faults = [f for f in cell.result.get("faults") or [] if "fired_s" in f]
    seen = (("detail", "what happened (a fault nobody declared)"),) if any(f.get("detail") for f in faults) else ()
    if any(f.get("rate_mbit") is not None for f in faults):
        seen += SQUEEZE_FIELDS
    return [{label: f.get(key) for key, label in FAULT_COST_FIELDS + seen} for f in faults]


def cell_section(cell: CellData) -> str:
    k = cell.key
    reason = cell.result.get("reason")
    head = (
        f'<p class="meta">cell <code>{page.esc(k.cell_id)}</code> · series key <code>{page.esc(k.series_key)}</code>'
        f" · status {page.status_badge(cell.status)}</p>" + (page.note(f"reason: {reason}") if reason else "")
    )
    if cell.analysis is None:
        body = head + page.note(f"no charts: {cell.analysis_error}") + "<h3>Context</h3>" + context_table(cell)
        return page.section(anchor(cell), k.title or k.cell_id, body)
    parts = [head, "<h3>Percentiles</h3>", percentile_table(cell)]
    for metric in cell.analysis.metrics:
        parts += [f"<h3>{page.esc(metric)}</h3>", metric_charts(cell, metric)]
    parts += [
        "<h3>Message accounting</h3>",
        accounting_table(cell),
        "<h3>Generator health</h3>",
        generator_table(cell),
        background_table(cell),
    ]
    events = [{"at (s since t0)": round(m.at_s, 3), "event": m.label} for m in markers(cell)]
    if events:
        parts += ["<h3>Faults and leader changes</h3>", page.records_table(events)]
    costs = fault_costs_records(cell)
    if costs:
        parts += ["<h3>What each fault cost</h3>", page.records_table(costs)]
    parts += ["<h3>Context</h3>", context_table(cell)]
    return page.section(anchor(cell), k.title or k.cell_id, "".join(parts))
