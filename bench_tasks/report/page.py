"""HTML building blocks: escaping, tables, sections and the self-contained page around them.

Everything the page needs is inline (CSS here, charts as <svg>), so the file opens offline and can be mailed
or attached to a ticket as it is. Nothing here reads files or computes statistics.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 0 24px 60px; color: #1c1c1c; }
h1 { margin: 24px 0 4px; } h2 { margin-top: 40px; border-bottom: 2px solid #ddd; padding-bottom: 4px; }
h3 { margin: 22px 0 6px; } .meta { color: #555; }
table { border-collapse: collapse; margin: 6px 0 14px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: #f5f5f5; } td.l, th.l { text-align: left; }
td.unsup { color: #999; font-style: italic; } tr.dim td { color: #666; }
.ok { color: #1e8449; font-weight: 600; } .failed { color: #c0392b; font-weight: 600; }
.note { background: #fdf6e3; border-left: 4px solid #e0b000; padding: 6px 10px; margin: 8px 0; }
.chart svg { width: 100%; height: auto; } pre { background: #f7f7f7; padding: 8px; overflow-x: auto; }
nav ol { columns: 2; } a { color: #1f618d; }
.scroll { overflow-x: auto; max-width: 100%; } .scroll table { font-size: 12px; white-space: nowrap; }
code { background: #f3f3f3; padding: 0 3px; }
"""


class Raw(str):
    """Markup made here (a link), placed in a table cell as it is rather than escaped."""


def link(href: str, text: str) -> Raw:
    return Raw(f'<a href="{esc(href)}">{esc(text)}</a>')


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def cell_text(value: Any) -> str:
    """A table cell for any JSON-ish value: lists and maps as compact JSON, floats trimmed."""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return "" if value is None else str(value)


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], left: int = 1, caption: str = "") -> str:
    """An HTML table; the first `left` columns are left-aligned text, the rest right-aligned numbers.
    A cell given as `("unsup.", "unsup")` gets that CSS class."""
    head = "".join(f'<th class="{"l" if i < left else ""}">{esc(h)}</th>' for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            cls = "l" if i < left else ""
            if isinstance(value, tuple):
                value, extra = value
                cls = f"{cls} {extra}".strip()
            text = value if isinstance(value, Raw) else esc(cell_text(value))
            cells.append(f'<td class="{cls}">{text}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def records_table(records: Sequence[Mapping[str, Any]], caption: str = "") -> str:
    """Whatever fields the records have, as columns in first-seen order (for files other code writes)."""
    columns: list[str] = []
    for r in records:
        columns += [k for k in r if k not in columns]
    return table(columns, ([r.get(c) for c in columns] for r in records), left=len(columns), caption=caption)


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    return table(("field", "value"), ((k, v) for k, v in pairs), left=2)


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def chart(svg: str) -> str:
    return f'<div class="chart">{svg}</div>'


def section(anchor: str, title: str, body: str, level: int = 2) -> str:
    return f'<section id="{esc(anchor)}"><h{level}>{esc(title)}</h{level}>{body}</section>'


def status_badge(status: str) -> str:
    return f'<span class="{"ok" if status == "ok" else "failed"}">{esc(status)}</span>'


def document(title: str, subtitle: str, index: Sequence[tuple[str, str]], body: str) -> str:
    """The whole page: title, an index of anchors (cells, comparisons), then the sections."""
    links = "".join(f'<li><a href="#{esc(a)}">{esc(t)}</a></li>' for a, t in index)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>"
        f'<h1>{esc(title)}</h1><p class="meta">{esc(subtitle)}</p>'
        f"<nav><h3>Contents</h3><ol>{links}</ol></nav>{body}</body></html>"
    )
