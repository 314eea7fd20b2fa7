"""The run report: a cell index, cross-cell overlays and ratios, pipeline outputs, then one section per cell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import page, systems_view
from .capacity_view import capacity_section
from .cell_view import BASES, anchor, cell_section, spectrum_of
from .charts import BASIS_STYLE, CYCLE, Curve, RatioLine, history_chart, ratio_chart, spectrum_chart
from .data import CellData, RunData
from .history_view import release_section
from .pairing import RATIO_KEYS, Pair, pairs_within_run, ratios
from .tables_view import pipeline_section
from .variation_view import variation_section

TABLES_FOLDER = "report-tables"  # beside report.html: the pipeline's tables in full, as CSV and Parquet


def analysed(cells: Sequence[CellData]) -> list[CellData]:
    return [c for c in cells if c.analysis is not None]


def summary_ms(cell: CellData, metric: str, basis: str) -> dict[str, float | None]:
    assert cell.analysis is not None
    return cell.analysis.metrics[metric][basis].as_ms()


def index_table(cells: Sequence[CellData]) -> str:
    rows = []
    for c in cells:
        first = next(iter(c.analysis.metrics), None) if c.analysis else None
        p999 = summary_ms(c, first, "intended").get("99.9") if first else None
        acc = c.result.get("accounting") or {}
        rows.append(
            [
                c.key.title,
                c.status,
                c.key.cell_id,
                c.key.series_key,
                acc.get("sent"),
                acc.get("lost"),
                first or "-",
                "unsup." if p999 is None else f"{p999:.3f}",
            ]
        )
    headers = ("cell", "status", "cell id", "series key", "sent", "lost", "metric", "p99.9 response (ms)")
    return page.table(headers, rows, left=4)


def overlay_section(cells: Sequence[CellData]) -> str:
    """Response-time spectra of every cell on one chart per metric, when more than one cell has the metric."""
    charts = []
    metrics = dict.fromkeys(m for c in analysed(cells) for m in c.analysis.metrics)  # type: ignore[union-attr]
    for metric in metrics:
        having = [c for c in analysed(cells) if metric in c.analysis.metrics]  # type: ignore[union-attr]
        if len(having) < 2:
            continue
        curves = [
            Curve(
                c.key.title,
                f"overlay-{metric}-{c.key.instance}",
                spectrum_of(c, metric, "intended"),
                CYCLE[i % len(CYCLE)],
            )
            for i, c in enumerate(having)
        ]
        charts.append(page.chart(spectrum_chart(f"{metric}: response time of every cell (measure phase)", curves)))
    if not charts:
        return ""
    return page.section("overlay", "All cells overlaid", "".join(charts))


def shared_metrics(a: CellData, b: CellData) -> list[str]:
    """Metrics both cells measured (an e2e cell and an rtt cell share none, so they have no ratio)."""
    if a.analysis is None or b.analysis is None:
        return []
    return [m for m in a.analysis.metrics if m in b.analysis.metrics]


def pair_lines(a: CellData, b: CellData) -> list[RatioLine]:
    """One ratio line per metric and basis that both cells measured (B/A from their exact summaries)."""
    lines = []
    for i, metric in enumerate(shared_metrics(a, b)):
        for basis in BASES:
            lines.append(
                RatioLine(
                    f"{metric} {BASIS_STYLE[basis][0]}",
                    f"ratio-{a.key.instance}-{b.key.instance}-{metric}-{basis}",
                    ratios(summary_ms(a, metric, basis), summary_ms(b, metric, basis)),
                    CYCLE[i % len(CYCLE)],
                    dashed=basis == "sent",
                )
            )
    return lines


def ratio_block(pair: Pair, a: CellData, b: CellData, heading: str) -> str:
    """Ratio chart and table of one pair, titled by what differs."""
    lines = pair_lines(a, b)
    differs = ", ".join(f"{f}: {_field(a.key.spec, f)} → {_field(b.key.spec, f)}" for f in pair.differs) or "nothing"
    rows = [
        [line.label, *(("unsup.", "unsup") if line.ratios[k] is None else f"{line.ratios[k]:.3f}" for k in RATIO_KEYS)]
        for line in lines
    ]
    table = page.table(("B/A", *(k if k == "max" else f"p{k}" for k in RATIO_KEYS)), rows)
    text = (
        f'<p class="meta">A = {page.esc(a.key.title)} ({page.esc(a.key.cell_id)}), B = {page.esc(b.key.title)} '
        f"({page.esc(b.key.cell_id)}); differs in {page.esc(differs)}</p>"
    )
    title = f"{heading}: B/A per percentile — {differs}"
    return f"<h3>{page.esc(heading)}</h3>" + text + page.chart(ratio_chart(title, RATIO_KEYS, lines)) + table


def _field(spec: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        spec = spec.get(part) if isinstance(spec, dict) else None
    return spec


def ratios_section(cells: Sequence[CellData]) -> str:
    ok = analysed(cells)
    by_id = {c.key.instance: c for c in ok}
    pairs = [
        p for p in pairs_within_run([c.key for c in ok]) if shared_metrics(by_id[p.a.instance], by_id[p.b.instance])
    ]
    if not pairs:
        body = page.note(
            "no comparable pair in this run: a ratio needs two analysed cells that measured a metric in common "
            "and whose specs differ in exactly one field (`sixnines report --compare RUN_A RUN_B` compares runs)"
        )
    else:
        body = "".join(
            ratio_block(p, by_id[p.a.instance], by_id[p.b.instance], f"pair {i}") for i, p in enumerate(pairs, 1)
        )
    return page.section("ratios", "Ratios between cells that differ in one field", body)


def regressions_section(run: RunData) -> str:
    data = run.regressions
    if data is None:
        return page.section("regressions", "Regressions", page.note("no regressions checked yet for this run"))
    alerts = data.get("alerts") if isinstance(data, dict) else data
    alerts = [a for a in (alerts or []) if isinstance(a, dict)]
    meta = ""
    if isinstance(data, dict):
        meta = page.key_values((k, v) for k, v in data.items() if k not in ("alerts", "change_points"))
    body = meta + (page.records_table(alerts, caption="alerts") if alerts else page.note("checked: no regression"))
    body += "".join(_alert_chart(alert, run.history_series, i) for i, alert in enumerate(alerts))
    return page.section("regressions", "Regressions", body)


def _alert_chart(alert: dict, series: list, index: int) -> str:
    """The alerted series over its runs with the change point marked; nothing when its history is not found."""
    wanted = tuple(alert.get(k) for k in ("series_key", "metric", "basis", "percentile", "view"))
    match = next((s for s in series if (s.series_key, s.metric, s.basis, s.percentile, s.view) == wanted), None)
    if match is None:
        return page.note(f"history of {' '.join(map(str, wanted))} not found")
    runs = [p.run_id for p in match.points]
    at = runs.index(alert["run_id"]) if alert.get("run_id") in runs else alert.get("index", 0)
    title = f"{alert.get('label', '')} {match.name}: {alert.get('summary', '')}"
    quantity = match.quantity
    values = [quantity.shown(p.value) for p in match.points]
    labels = [p.run_date for p in match.points]
    axis = f"{quantity.name} ({quantity.shown_unit})"
    return history_chart(title[:140], labels, values, at, f"regression-{index}", axis)


def render_run(run: RunData, tables_folder: str = TABLES_FOLDER) -> str:
    """The whole page; `tables_folder` is where build.py writes the full tables, relative to the page."""
    cells = run.cells
    systems = systems_view.systems_section(cells)
    body = (
        page.section("index", "Cells", index_table(cells))
        + capacity_section(run.capacity)
        + overlay_section(cells)
        + systems
        + ratios_section(cells)
        + variation_section(cells)
        + release_section(run.release_histories)
        + regressions_section(run)
        + pipeline_section(run, tables_folder)
        + "".join(cell_section(c) for c in cells)
    )
    index = [("index", "Cells"), *([("capacity", "Capacity")] if run.capacity else [])]
    index += [(anchor(c), c.key.title or c.key.cell_id) for c in cells]
    index += [(systems_view.ANCHOR, systems_view.TITLE)] if systems else []
    index += [("ratios", "Ratios")]
    index += [("variation", "Run-to-run variation")] if any(c.key.repeats > 1 for c in cells) else []
    index += [("releases", "Release history")] if run.release_histories else []
    index += [("regressions", "Regressions")]
    index += [("pipeline", "Pipeline tables")] if run.tables else []
    subtitle = f"run {run.run_id} · {run.run_date} · {len(cells)} cell(s) · lake {run.lake_root}"
    return page.document(f"sixnines report — run {run.run_id}", subtitle, index, body)
