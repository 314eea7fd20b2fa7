"""The comparison report of two runs: cells paired by series key, each pair overlaid and divided (B/A)."""

from __future__ import annotations

from . import page
from .cell_view import BASES, pruned_note, spectrum_of
from .charts import BASIS_STYLE, Curve, spectrum_chart
from .data import CellData, RunData
from .pairing import pairs_across_runs
from .run_view import index_table, ratio_block

RUN_STYLE = {"A": "#2471a3", "B": "#c0392b"}


def pair_spectra(a: CellData, b: CellData) -> str:
    """Per shared metric: A and B on one spectrum, response time solid and service time dashed."""
    assert a.analysis is not None and b.analysis is not None
    charts = []
    for metric in (m for m in a.analysis.metrics if m in b.analysis.metrics):
        curves = [
            Curve(
                f"{side} ({cell.key.spec.get('version')}) {BASIS_STYLE[basis][0]}",
                f"compare-{a.key.series_key}-r{a.key.repeat}-{metric}-{side}-{basis}",
                spectrum_of(cell, metric, basis),
                RUN_STYLE[side],
                dashed=basis == "sent",
            )
            for side, cell in (("A", a), ("B", b))
            for basis in BASES
        ]
        charts.append(page.chart(spectrum_chart(f"{metric}: run A vs run B — {b.key.title}", curves)))
    return "".join(charts) + "".join(pruned_note(c) for c in (a, b) if c.samples_pruned)


def render_compare(run_a: RunData, run_b: RunData) -> str:
    """Pairs by series key (pairing refuses, naming the differing fields, when nothing pairs)."""
    pairs = pairs_across_runs([c.key for c in run_a.cells], [c.key for c in run_b.cells])
    a_by = {c.key.instance: c for c in run_a.cells}
    b_by = {c.key.instance: c for c in run_b.cells}
    sections, index = [], [("runs", "Runs")]
    unpaired = [c.key.title for c in run_b.cells if c.key.instance not in {p.b.instance for p in pairs}]
    for i, pair in enumerate(pairs, 1):
        a, b = a_by[pair.a.instance], b_by[pair.b.instance]
        anchor = f"pair-{i}"
        index.append((anchor, b.key.title))
        if a.analysis is None or b.analysis is None:
            missing = a if a.analysis is None else b
            body = page.note(f"cell {missing.key.cell_id} has no analysis: {missing.analysis_error}")
        else:
            body = pair_spectra(a, b) + ratio_block(pair, a, b, "B/A")
        sections.append(page.section(anchor, f"{i}. {b.key.title}", body))
    runs = (
        "<h3>A</h3>"
        + index_table(run_a.cells)
        + "<h3>B</h3>"
        + index_table(run_b.cells)
        + (page.note(f"cells of B without a partner in A: {', '.join(unpaired)}") if unpaired else "")
    )
    body = page.section("runs", "Runs", runs) + "".join(sections)
    subtitle = (
        f"A = run {run_a.run_id} ({run_a.run_date}) · B = run {run_b.run_id} ({run_b.run_date}) · "
        f"{len(pairs)} pair(s) by series key"
    )
    return page.document(f"sixnines comparison — {run_a.run_id} vs {run_b.run_id}", subtitle, index, body)
