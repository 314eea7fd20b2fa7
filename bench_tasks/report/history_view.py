"""The report's release history: a cell measured on several releases (a history matrix, or runs on different
releases of one series), every percentile charted against release with each release's run-to-run band, and the
first release whose tail moved beyond the noise named (`regressions.releases`)."""

from __future__ import annotations

from collections.abc import Sequence

from ..regressions.history import SERIES_PERCENTILES, VALUE_COLUMNS
from ..regressions.releases import ReleaseHistory, ReleaseMove, moves, tail_verdict
from . import page
from .charts import CYCLE, ReleaseLine, release_chart

CHARTED = ("50", "90", "99", "99.9", "99.99", "max")  # p50 to p99.99, and the max
BASES = {"intended": "response time", "sent": "service time"}
NS_PER_MS = 1e6


def release_section(histories: Sequence[ReleaseHistory]) -> str:
    """The section, or nothing when no cell of the run was measured on two releases."""
    shown = [h for h in histories if h.basis in BASES]
    if not shown:
        return ""
    body = page.note(
        "Each percentile of a cell against release, in release order; a release measured in several runs stands by "
        "its newest. Bars: the min–max across that release's repeats. A move counts when it exceeds the "
        "regression detector's bar (10 %, or the repeats' own variation when larger) and leaves the band of the "
        "release before it."
    )
    body += "".join(_history(h, i) for i, h in enumerate(shown))
    return page.section("releases", "Release history", body)


def _history(history: ReleaseHistory, index: int) -> str:
    found = moves(history)
    verdict = tail_verdict(found)
    releases = history.releases
    cell = history.label.replace(f" {releases[-1]} ", " ")  # the label of the newest release, without it
    title = f"{cell} · {history.metric} {BASES[history.basis]}"
    chart = release_chart(
        title[:140],
        releases,
        [_line(history, p, i, index) for i, p in enumerate(CHARTED)],
        None if verdict is None else releases.index(verdict.release),
    )
    return page.section(
        f"releases-{index}", title, page.note(_verdict_text(verdict, releases)) + page.chart(chart) + _moves(found), 3
    )


def _line(history: ReleaseHistory, percentile: str, color: int, index: int) -> ReleaseLine:
    values = [_ms(row.get(VALUE_COLUMNS[percentile])) for row in history.rows]
    bands = [None if b is None else (b[0] / NS_PER_MS, b[1] / NS_PER_MS) for b in history.bands[percentile]]
    label = _percentile_label(percentile)
    return ReleaseLine(label, f"release-{index}-{label}", values, bands, CYCLE[color % len(CYCLE)])


def _percentile_label(percentile: str) -> str:
    """`99.9` → `p99.9`; the maximum is `max`, not a percentile."""
    return "max" if percentile == "max" else f"p{percentile}"


def _ms(value: float | None) -> float | None:
    return None if value is None else float(value) / NS_PER_MS


def _verdict_text(verdict: ReleaseMove | None, releases: Sequence[str]) -> str:
    if verdict is None:
        return f"No release's tail moved beyond the noise ({releases[0]} → {releases[-1]})."
    c, label = verdict.change, _percentile_label(verdict.percentile)
    return (
        f"The tail moved at {verdict.release}: {label} {c.before:.3f} → {c.after:.3f} {c.unit} "
        f"({c.relative_change:+.0%}) against {verdict.previous}, beyond the bar of {c.threshold:.0%}."
    )


def _moves(found: Sequence[ReleaseMove]) -> str:
    if not found:
        return ""
    rows = [
        (
            _percentile_label(m.percentile),
            m.previous,
            m.release,
            f"{m.change.before:.3f} → {m.change.after:.3f} {m.change.unit}",
            f"{m.change.relative_change:+.0%}",
            f"{m.change.threshold:.0%}",
        )
        for m in found
        if m.percentile in SERIES_PERCENTILES
    ]
    headers = ("percentile", "from", "moved at", "value", "change", "bar")
    return page.table(headers, rows, caption="The first move of each percentile beyond the noise")
