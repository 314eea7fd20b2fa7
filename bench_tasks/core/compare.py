"""Version comparison from landed cell rows: the same series (cell spec without its version) side by side.

Pure: rows in (as read from `cells.parquet`), comparison out. Percentiles are the ones each cell computed
over its own raw samples; nothing is averaged. A version whose cell failed is shown with its status, and
its numbers are kept out of the change column.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .percentiles import PERCENTILES

COMPARISON_SCHEMA_VERSION = 1  # 1: first version
SHOWN = ("50", "99", "99.9", "max")


def compare_versions(rows: Sequence[dict[str, Any]], versions: Sequence[str]) -> list[dict[str, Any]]:
    """One entry per (series key, metric, basis), with each version's count, percentiles (ms) and status, in
    the order `versions` lists them, and the change from the first to the last version that both passed."""
    by_series: dict[str, dict[str, dict[str, Any]]] = {}
    for row in rows:
        if row["version"] in versions:
            by_series.setdefault(row["series_key"], {})[row["version"]] = row
    out = []
    for key in sorted(by_series):
        cells = by_series[key]
        first = next(iter(cells.values()))
        label = first["label"].replace(f" {first['version']} ", " ")
        metrics: dict[tuple[str, str], dict[str, Any]] = {}
        for version in versions:
            row = cells.get(version)
            results = json.loads(row["results_json"] or "null") if row else None
            for metric, by_basis in ((results or {}).get("metrics") or {}).items():
                for basis, summary in by_basis.items():
                    entry = metrics.setdefault((metric, basis), {})
                    entry[version] = {
                        "status": row["status"] if row else "missing",
                        "cell_id": row["cell_id"] if row else None,
                        "count": summary["count"],
                        **{p: _ms(summary["percentiles_ns"].get(p)) for p in PERCENTILES},
                        "max": _ms(summary["max_ns"]),
                    }
        for (metric, basis), by_version in sorted(metrics.items()):
            for version in versions:
                by_version.setdefault(version, {"status": "missing" if version not in cells else "no data"})
            out.append(
                {
                    "series_key": key,
                    "label": label,
                    "metric": metric,
                    "basis": basis,
                    "versions": {v: by_version[v] for v in versions},
                    "change_pct": _change(by_version, versions),
                }
            )
    return out


def _ms(value_ns: float | None) -> float | None:
    return None if value_ns is None else value_ns / 1e6


def _change(by_version: dict[str, dict[str, Any]], versions: Sequence[str]) -> dict[str, float | None]:
    """Relative change of each shown percentile from the first to the last listed version, when both cells
    passed and the percentile is supported by both."""
    a, b = by_version[versions[0]], by_version[versions[-1]]
    if a.get("status") != "ok" or b.get("status") != "ok":
        return {}
    return {p: None if not a.get(p) or b.get(p) is None else round(100 * (b[p] - a[p]) / a[p], 1) for p in SHOWN}


def format_comparison(entries: Sequence[dict[str, Any]], versions: Sequence[str]) -> str:
    """A plain-text table: one line per series, metric, basis and version."""
    header = f"{'series':12} {'metric':14} {'version':10} {'status':8} {'count':>7} " + " ".join(
        f"{'p' + p if p != 'max' else 'max':>9}" for p in SHOWN
    )
    lines = [header]
    for e in entries:
        for v in versions:
            cell = e["versions"][v]
            values = " ".join(f"{_fmt(cell.get(p)):>9}" for p in SHOWN)
            lines.append(
                f"{e['series_key']:12} {e['metric'] + ' ' + e['basis']:14} {v:10} {cell['status']:8} "
                f"{cell.get('count', 0):>7} {values}"
            )
        if e["change_pct"]:
            change = " ".join(f"{_pct(e['change_pct'].get(p)):>9}" for p in SHOWN)
            lines.append(f"{'':12} {'':14} {'change':10} {'':8} {'':>7} {change}")
        lines.append(f"{'':12} {e['label']}")
    return "\n".join(lines)


def _fmt(ms: float | None) -> str:
    return "unsup." if ms is None else f"{ms:.3f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
