"""The run report's systems side by side: seed 002's "how much higher" chart, per percentile.

For each load that two or more systems ran (side_by_side has the pairing rule and why), and each metric all
its ok cells measured: a chart of every cell's latency over the fastest cell's, per percentile from p50 to
the max (response time solid, service time dashed), and a table of those ratios beside the milliseconds they
divide. A failed cell is left out of the ratios and listed with its reason: a saturated harness or a broker
that fell behind is a result of the run, never a system's latency. A repeated cell's percentiles are those
of all its ok repeats' measure-phase samples together, recomputed exactly (never averaged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ..core.percentiles import summarize
from . import page
from .cell_view import BASES, measure_values
from .charts import BASIS_STYLE, CYCLE, RatioLine, ratio_chart
from .data import CellData
from .pairing import RATIO_KEYS, spec_differences
from .side_by_side import Group, fastest, ratios_to, side_by_side, unmatched

ANCHOR = "systems"
TITLE = "Systems side by side: how much higher"
MAX_FIELDS = 10  # differing spec fields named per cell; the rest are counted
Summaries = dict[str, dict[str, float | None]]  # cell id → percentile key → ms


def repeats_of(cells: Sequence[CellData], cell_id: str) -> list[CellData]:
    return [c for c in cells if c.key.cell_id == cell_id]


def usable(repeats: Sequence[CellData]) -> list[CellData]:
    """The repeats whose numbers may stand for their system: landed ok and analysed; several repeats only with
    their samples (they are merged exactly, never averaged), so none of a pruned run's repeated cells."""
    ok = [r for r in repeats if r.status == "ok" and r.analysis is not None]
    return [] if len(ok) > 1 and any(r.samples_pruned for r in ok) else ok


def merged_ms(repeats: Sequence[CellData], metric: str, basis: str) -> dict[str, float | None]:
    """A cell's percentiles (ms): its landed summary, or all its repeats' samples together, exactly."""
    if len(repeats) == 1:
        assert repeats[0].analysis is not None
        return repeats[0].analysis.metrics[metric][basis].as_ms()
    return summarize(np.concatenate([measure_values(r, metric, basis) for r in repeats])).as_ms()


def shared_metrics(members: Mapping[str, Sequence[CellData]]) -> list[str]:
    """Metrics every repeat of every cell measured, in the first cell's order (e2e first for a chain)."""
    analyses = [r.analysis for repeats in members.values() for r in repeats if r.analysis is not None]
    return [m for m in analyses[0].metrics if all(m in a.metrics for a in analyses)] if analyses else []


def _value(value: float | None, digits: str) -> str | tuple[str, str]:
    return ("unsup.", "unsup") if value is None else format(value, digits)


def by_basis(metric: str, members: Mapping[str, Sequence[CellData]]) -> dict[str, Summaries]:
    """Each basis's percentiles (ms) of every cell, computed once for the chart and the table."""
    return {basis: {cid: merged_ms(repeats, metric, basis) for cid, repeats in members.items()} for basis in BASES}


def metric_table(metric: str, names: Mapping[str, str], summaries: Mapping[str, Summaries], reference: str) -> str:
    """Per cell and basis: its percentiles in ms, then its ratio to the reference cell."""
    rows = []
    for basis, per_cell in summaries.items():
        ratios = ratios_to(reference, per_cell)
        what = BASIS_STYLE[basis][0]
        for cid, name in names.items():
            rows.append([name, f"{what} (ms)", *(_value(per_cell[cid][k], ".4g") for k in RATIO_KEYS)])
            rows.append(["", f"{what} × fastest", *(_value(ratios[cid][k], ".3g") for k in RATIO_KEYS)])
    headers = ("cell", "", *(k if k == "max" else f"p{k}" for k in RATIO_KEYS))
    return page.table(headers, rows, left=2, caption=f"{metric}: percentiles and ratio to the fastest cell")


def cell_name(repeats: Sequence[CellData]) -> str:
    key = repeats[0].key
    merged = f" ({len(repeats)} repeats merged)" if len(repeats) > 1 else ""
    return f"{key.label} [{key.cell_id}]{merged}"


def metric_chart(
    metric: str, names: Mapping[str, str], summaries: Mapping[str, Summaries], reference: str, index: int
) -> str:
    """Every other cell's ratio to the reference per percentile; the reference is the line at 1."""
    lines = []
    for basis, per_cell in summaries.items():
        ratios = ratios_to(reference, per_cell)
        for i, (cid, name) in enumerate(names.items()):
            if cid != reference:
                gid = f"systems-{index}-{metric}-{cid}-{basis}"
                label = f"{name} — {BASIS_STYLE[basis][0]}"
                lines.append(RatioLine(label, gid, ratios[cid], CYCLE[i % len(CYCLE)], dashed=basis == "sent"))
    title = f"{metric}: latency of each cell over the fastest one's, per percentile (fastest: [{reference}])"
    return page.chart(ratio_chart(title, RATIO_KEYS, lines, ylabel="latency ÷ fastest cell's (log; 1 = equal)"))


def differences(members: Mapping[str, Sequence[CellData]], reference: str) -> str:
    """What each cell's spec has that the reference's has not (each system in its own configuration)."""
    ref = members[reference][0].key
    items = []
    for cid, repeats in members.items():
        if cid == reference:
            continue
        fields = spec_differences(ref.spec, repeats[0].key.spec)
        shown = ", ".join(fields[:MAX_FIELDS]) + (
            f" and {len(fields) - MAX_FIELDS} more" if len(fields) > MAX_FIELDS else ""
        )
        items.append(f"<li>{page.esc(repeats[0].key.label)}: {page.esc(shown)}</li>")
    return f'<p class="meta">spec fields that differ from the fastest cell:</p><ul>{"".join(items)}</ul>'


def left_out(cells: Sequence[CellData], group: Group) -> str:
    """A note per cell of the group that has no usable repeat, with the reason it landed with."""
    notes = []
    for cid in group.cell_ids:
        repeats = repeats_of(cells, cid)
        if not usable(repeats):
            first = repeats[0]
            reason = first.result.get("reason") or first.analysis_error or _why_unusable(first)
            notes.append(page.note(f"left out: {first.key.label} [{cid}] {first.status}: {reason}"))
    return "".join(notes)


def _why_unusable(cell: CellData) -> str:
    if cell.samples_pruned:
        return f"its repeats cannot be merged exactly: raw samples pruned ({cell.samples_pruned})"
    return "no analysis"


def group_block(cells: Sequence[CellData], group: Group, index: int) -> str:
    members = {cid: usable(repeats_of(cells, cid)) for cid in group.cell_ids}
    members = {cid: repeats for cid, repeats in members.items() if repeats}
    heading = f"<h3>{page.esc(group.load.title)}: {page.esc(' · '.join(group.systems))}</h3>"
    systems = {str(r[0].key.spec.get("system")) for r in members.values()}
    metrics = shared_metrics(members)
    if len(systems) < 2 or not metrics:
        why = "fewer than two systems have an ok cell here" if len(systems) < 2 else "no metric measured by all"
        return heading + left_out(cells, group) + page.note(f"no ratio for this load: {why}")
    first = metrics[0]
    reference = fastest({cid: merged_ms(r, first, "intended") for cid, r in members.items()})  # one per load
    body = [
        f'<p class="meta">fastest cell (lowest {first} response-time p99): '
        f"{page.esc(members[reference][0].key.label)} [{page.esc(reference)}]</p>",
        differences(members, reference),
        left_out(cells, group),
    ]
    names = {cid: cell_name(repeats) for cid, repeats in members.items()}
    for metric in metrics:
        summaries = by_basis(metric, members)
        body += [
            metric_chart(metric, names, summaries, reference, index),
            metric_table(metric, names, summaries, reference),
        ]
    return heading + "".join(body)


def systems_section(cells: Sequence[CellData]) -> str:
    """The section, or nothing when no load of the run was run by two systems."""
    keys = [c.key for c in cells]
    groups = side_by_side(keys)
    if not groups:
        return ""
    intro = page.note(
        "cells of different systems with the same measurement, message size and rate, each percentile divided "
        "by the fastest cell's at the same percentile: seed 002's 'how much higher' chart. Response time "
        "(from the intended send) solid, service time (from the actual send) dashed."
    )
    blocks = "".join(group_block(cells, g, i) for i, g in enumerate(groups, 1))
    lonely = unmatched(keys)
    tail = ""
    if lonely:
        names = ", ".join(f"{c.label} [{c.cell_id}]" for c in lonely)
        tail = page.note(f"no other system ran these cells' rate, so they have no ratio: {names}")
    return page.section(ANCHOR, TITLE, intro + blocks + tail)
