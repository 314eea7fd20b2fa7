"""The report's run-to-run variation of repeated cells (matrix `repeats:`), JLBH-style.

Per repeated cell, metric and basis: every repeat's percentiles side by side, their min / median / max and the
% variation as JLBH prints it (bench_tasks.core.variation), and one spectrum chart with a curve per repeat, so a
repeat that went its own way is seen before it is read. Every value is a repeat's exact percentile from its
raw samples; nothing is averaged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from ..core.variation import spread
from . import page
from .cell_view import BASES, spectrum_of
from .charts import BASIS_STYLE, CYCLE, Curve, spectrum_chart
from .data import CellData
from .pairing import RATIO_KEYS


def repeated_cells(cells: Sequence[CellData]) -> dict[str, list[CellData]]:
    """Analysed repeats of each repeated cell, by cell id, in repeat order (only cells with two or more)."""
    groups: dict[str, list[CellData]] = defaultdict(list)
    for c in cells:
        if c.key.repeats > 1 and c.analysis is not None:
            groups[c.key.cell_id].append(c)
    return {cid: sorted(g, key=lambda c: c.key.repeat) for cid, g in groups.items() if len(g) > 1}


def _ms(value: float | None) -> str | tuple[str, str]:
    return ("unsup.", "unsup") if value is None else f"{value:.3f}"


def variation_table(repeats: Sequence[CellData], metric: str, basis: str) -> str:
    """Statistic down, repeats across, then min, median, max and % variation (milliseconds)."""
    per_repeat = [r.analysis.metrics[metric][basis].as_ms() for r in repeats]  # type: ignore[union-attr]
    rows = []
    for key in RATIO_KEYS:
        values = [m.get(key) for m in per_repeat]
        s = spread(values)
        if s is None:
            continue
        var = "—" if s.variation_pct is None else f"{s.variation_pct:.2f}"
        name = f"p{key}" if key != "max" else "max"
        rows.append([name, *map(_ms, values), _ms(s.min), _ms(s.median), _ms(s.max), var])
    headers = ("statistic", *(f"repeat {r.key.repeat}" for r in repeats), "min", "median", "max", "% variation")
    return page.table(headers, rows, caption=f"{metric} {BASIS_STYLE[basis][0]} (ms)")


def repeats_chart(repeats: Sequence[CellData], metric: str) -> str:
    """Response-time spectra of every repeat on one chart."""
    curves = [
        Curve(
            f"repeat {r.key.repeat}",
            f"repeat-{r.key.instance}-{metric}",
            spectrum_of(r, metric, "intended"),
            CYCLE[i % len(CYCLE)],
        )
        for i, r in enumerate(repeats)
    ]
    title = f"{metric}: response time of each repeat (measure phase) — {repeats[0].key.label}"
    return page.chart(spectrum_chart(title, curves))


def variation_section(cells: Sequence[CellData]) -> str:
    groups = repeated_cells(cells)
    if not groups:
        return ""
    parts = [
        page.note(
            "% variation = 100 · (max − min) / (max + min / 2) across repeats, as JLBH prints it; the regression "
            "check will not alert on a shift smaller than this noise"
        )
    ]
    for cell_id, repeats in groups.items():
        parts.append(f"<h3>{page.esc(repeats[0].key.label)} <code>{page.esc(cell_id)}</code></h3>")
        first = repeats[0].analysis
        assert first is not None
        metrics = [m for m in first.metrics if all(m in r.analysis.metrics for r in repeats)]  # type: ignore[union-attr]
        for metric in metrics:
            parts.append(repeats_chart(repeats, metric))
            parts += [variation_table(repeats, metric, basis) for basis in BASES]
    return page.section("variation", "Run-to-run variation of repeated cells", "".join(parts))
