"""The report's "Pipeline tables and data quality" section: a summary of each Spark table, not a dump.

Per table: its row count, the gate's verdict, links to the whole table as CSV and Parquet (written beside
the report by build.py), the columns that hold one value in every row stated once (the run id, the schema
version), its schema folded away, and its first rows. A timeline or histogram table has hundreds of rows
per cell; a reader who wants them opens the CSV, everyone else scrolls past a few lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from . import page
from .data import GATE_FAILED, GATE_PASSED, RunData

HEAD_ROWS = 5
GATE_TEXT = {
    GATE_PASSED: "passed — the tables are published",
    GATE_FAILED: "failed — the tables are quarantined, not published",
}


def table_files(folder: str, name: str) -> dict[str, str]:
    """Where a table's full files are, relative to the report."""
    return {fmt: f"{folder}/{name}.{fmt}" for fmt in ("csv", "parquet")}


def constant_columns(table: pa.Table) -> dict[str, Any]:
    """Columns with one value in every row, in schema order (none for a table of fewer than two rows: its one
    row is shown whole)."""
    out: dict[str, Any] = {}
    if table.num_rows < 2:
        return out
    for name in table.column_names:
        if pa.types.is_nested(table.schema.field(name).type):
            continue
        column = table[name]
        if column.null_count == 0 and len(column.unique()) == 1:
            out[name] = column[0].as_py()
    return out


def value_text(value: Any) -> str:
    """A cell of a table head: integers with thousands separators, floats without exponents (1,246,970 rather
    than 1.24697e+06), lists as compact JSON."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "NaN"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, default=str)
    return str(value)


def schema_table(table: pa.Table) -> str:
    rows = [(f.name, str(f.type), "" if f.nullable else "not null") for f in table.schema]
    return page.table(("column", "type", ""), rows, left=3)


def head_table(table: pa.Table, hidden: Sequence[str], rows: int = HEAD_ROWS) -> str:
    """The first rows without the constant columns; wide tables scroll inside their box."""
    columns = [c for c in table.column_names if c not in hidden]
    head = table.select(columns).slice(0, rows).to_pylist()
    body = page.table(columns, ([value_text(r[c]) for c in columns] for r in head), left=len(columns))
    return f'<div class="scroll">{body}</div>'


def table_block(name: str, table: pa.Table, gate: str, files: Mapping[str, str]) -> str:
    constant = constant_columns(table)
    links = " · ".join(page.link(path, fmt.upper()) for fmt, path in files.items())
    meta = (
        f'<p class="meta">{table.num_rows:,} rows × {table.num_columns} columns · gate: {page.esc(gate)} · '
        f"full table: {links}</p>"
    )
    same = (
        "<p>in every row: "
        + ", ".join(f"<code>{page.esc(k)}</code> = {page.esc(value_text(v))}" for k, v in constant.items())
        + "</p>"
        if constant
        else ""
    )
    shown = min(HEAD_ROWS, table.num_rows)
    return (
        f'<h3 id="table-{page.esc(name)}">table {page.esc(name)}</h3>'
        + meta
        + same
        + f"<details><summary>schema ({table.num_columns} columns)</summary>{schema_table(table)}</details>"
        + (f"<p>first {shown} of {table.num_rows:,} rows:</p>" + head_table(table, list(constant)) if shown else "")
    )


def summary_table(run: RunData, folder: str) -> str:
    """One line per table: rows, columns, links — the section's own index."""
    rows = []
    for name, table in run.tables.items():
        files = table_files(folder, name)
        links = [page.link(files[fmt], f"{name}.{fmt}") for fmt in ("csv", "parquet")]
        rows.append((page.link(f"#table-{name}", name), f"{table.num_rows:,}", table.num_columns, *links))
    return page.table(("table", "rows", "columns", "CSV", "Parquet"), rows, left=5)


def validation_block(run: RunData) -> str:
    v = run.validation
    if v is None:
        return ""
    failed = v.get("failed") if isinstance(v, dict) else None
    if isinstance(failed, list) and failed:
        return "<h3>Data quality: failed expectations</h3>" + page.table(("expectation",), ((f,) for f in failed))
    text = page.esc(json.dumps(v, indent=2, default=str))
    return f"<h3>Data quality</h3><details><summary>validation result</summary><pre>{text}</pre></details>"


def pipeline_section(run: RunData, folder: str) -> str:
    """The section, or nothing when the pipeline has not run for this run."""
    if not run.tables and run.validation is None and not run.notes:
        return ""
    gate = GATE_TEXT.get(run.gate, run.gate)
    parts = [f"<p>Data-quality gate (Great Expectations): <strong>{page.esc(gate)}</strong></p>"]
    if run.tables:
        parts.append(summary_table(run, folder))
    parts.append(validation_block(run))
    parts += [table_block(name, table, run.gate, table_files(folder, name)) for name, table in run.tables.items()]
    parts += [page.note(n) for n in run.notes]
    return page.section("pipeline", "Pipeline tables and data quality", "".join(parts))
