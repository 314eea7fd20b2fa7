"""Compare job: A/B tables between two runs, two versions or two configurations — ratio B/A per percentile
and max, per metric × basis × leader, for cells whose specs differ only in the compared axis.

- axis `run` (default): the same cell (identical spec) in run A and run B;
- axis `version`: cells whose specs differ only in `version` (same series key);
- axis `<dotted.path>` (e.g. `broker.mode`, `client.producer.acks`): cells differing only under that path.
An explicit pair (`--cell-a X --cell-b Y`) that differs in anything else is refused with a CompareError
naming the differing fields; host, client-library and harness differences are not refused but listed
in `context_differs` (STYLE 6: say what differs).
Run alone: `spark-submit spark_jobs/compare.py --lake L --run-id A --run-id B [--axis version]`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from bench_tasks import PERCENTILES
from spark_jobs import jobargs, lakeio
from spark_jobs.errors import CompareError
from spark_jobs.exact import percentile_column
from spark_jobs.localdata import arrow_table
from spark_jobs.percentiles import TABLES_SCHEMA_VERSION, VERSION_FIELD

STATISTICS = (*[(f"p{p}", percentile_column(p)) for p in PERCENTILES], ("max", "max_ns"))
CONTEXT_CHECKED = ("host", "clients", "harness_git_sha")


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} → {"a.b": 1}; lists stay values."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Dotted paths whose values differ (or exist on one side only)."""
    fa, fb = flatten(a), flatten(b)
    return sorted(k for k in fa.keys() | fb.keys() if fa.get(k, "<absent>") != fb.get(k, "<absent>"))


def _allowed(path: str, axis: str) -> bool:
    return axis != "run" and (path == axis or path.startswith(f"{axis}."))


def check_comparable(spec_a: dict[str, Any], spec_b: dict[str, Any], axis: str, names: str = "") -> None:
    """Refuse a pair whose specs differ outside `axis`, naming every such field."""
    others = [p for p in differing(spec_a, spec_b) if not _allowed(p, axis)]
    if others:
        raise CompareError(f"cannot compare {names}along '{axis}': the specs also differ in {', '.join(others)}")


def _key(spec: dict[str, Any], axis: str) -> str:
    return json.dumps({k: v for k, v in flatten(spec).items() if not _allowed(k, axis)}, sort_keys=True, default=str)


def pair_cells(
    cells_a: Iterable[dict[str, Any]], cells_b: Iterable[dict[str, Any]], axis: str
) -> list[tuple[str, str]]:
    """(cell A, cell B) pairs whose specs are equal outside `axis` (and differ in it, unless axis is `run`)."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for b in cells_b:
        by_key.setdefault(_key(json.loads(b["spec_json"]), axis), []).append(b)
    pairs = []
    for a in cells_a:
        spec_a = json.loads(a["spec_json"])
        for b in by_key.get(_key(spec_a, axis), []):
            if axis == "run" or differing(spec_a, json.loads(b["spec_json"])):
                pairs.append((a["cell_id"], b["cell_id"]))
    return pairs


def context_differs(context_a: dict[str, Any], context_b: dict[str, Any]) -> list[str]:
    """Provenance that differs between two cells: host, client libraries, harness sha."""
    pick = {k: context_a.get(k) for k in CONTEXT_CHECKED}, {k: context_b.get(k) for k in CONTEXT_CHECKED}
    return differing(*pick)


COMPARE_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        pa.field("axis", pa.string(), nullable=False),
        *(pa.field(f"{name}_{tag}", pa.string()) for name in ("run", "cell", "label") for tag in "ab"),
        pa.field("metric", pa.string()),
        pa.field("basis", pa.string()),
        pa.field("leader", pa.int32()),
        pa.field("statistic", pa.string(), nullable=False),
        *(pa.field(name, pa.int64()) for name in ("count_a", "count_b", "a_ns", "b_ns")),
        pa.field("ratio", pa.float64()),
        pa.field("context_differs", pa.list_(pa.string())),
    ]
)
PAIR_KEYS = ["metric", "basis", "_leader", "statistic"]


def _side(pct: pd.DataFrame, tag: str) -> pd.DataFrame:
    """One side's percentile rows long: a row per statistic, its value in `<tag>_ns` (leader -1: all)."""
    names = {"run_id": f"run_{tag}", "cell_id": f"cell_{tag}", "label": f"label_{tag}", "count": f"count_{tag}"}
    base = pct[[*names, "metric", "basis"]].rename(columns=names).assign(_leader=pct["leader"].fillna(-1))
    longs = [base.assign(statistic=name, **{f"{tag}_ns": pct[column]}) for name, column in STATISTICS]
    return pd.concat(longs, ignore_index=True)


def compare_table(pct_a: pd.DataFrame, pct_b: pd.DataFrame, pairs: pd.DataFrame, axis: str) -> pa.Table:
    """Long table: one row per pair × metric × basis × leader × statistic with a_ns, b_ns and ratio b/a
    (null where either side is unsupported). `pairs`: cell_a, cell_b, context_differs."""
    joined = pairs.merge(_side(pct_a, "a"), on="cell_a").merge(_side(pct_b, "b"), on=["cell_b", *PAIR_KEYS])
    table = joined.assign(
        schema_version=TABLES_SCHEMA_VERSION,
        axis=axis,
        leader=joined["_leader"].where(joined["_leader"] >= 0),
        ratio=(joined["b_ns"] / joined["a_ns"]).where(joined["a_ns"] != 0),
    )
    return arrow_table(table, COMPARE_SCHEMA)


def run(
    lake: lakeio.Lake,
    run_a: str,
    run_b: str,
    axis: str = "run",
    cell_a: str | None = None,
    cell_b: str | None = None,
) -> Path:
    """Compare run B against baseline run A (the same run for a configuration axis within one sweep): read and
    built on the driver (the cells rows and the percentile tables are small)."""
    ref_a, ref_b = lakeio.find_run(lake, run_a), lakeio.find_run(lake, run_b)
    rows_a = {r["cell_id"]: r for r in lakeio.cells_table(lake, [ref_a]).to_pylist()}
    rows_b = {r["cell_id"]: r for r in lakeio.cells_table(lake, [ref_b]).to_pylist()}
    if cell_a or cell_b:
        if cell_a not in rows_a or cell_b not in rows_b:
            raise CompareError(f"no cell {cell_a} in run {run_a} or no cell {cell_b} in run {run_b}")
        spec_a, spec_b = json.loads(rows_a[cell_a]["spec_json"]), json.loads(rows_b[cell_b]["spec_json"])
        check_comparable(spec_a, spec_b, axis, f"{cell_a} with {cell_b} ")
        pairs = [(cell_a, cell_b)]
    else:
        pairs = pair_cells(rows_a.values(), rows_b.values(), axis)
        if not pairs:
            raise CompareError(f"no cells of runs {run_a} and {run_b} differ only along '{axis}'")
    pair_rows = [
        (
            x,
            y,
            context_differs(
                json.loads(rows_a[x]["context_json"] or "{}"), json.loads(rows_b[y]["context_json"] or "{}")
            ),
        )
        for x, y in pairs
    ]
    pairs_frame = pd.DataFrame(pair_rows, columns=["cell_a", "cell_b", "context_differs"])
    pct_a, pct_b = (lakeio.table_rows(lake, "percentiles", ref).to_pandas() for ref in (ref_a, ref_b))
    name = f"{axis}__{run_b}__vs__{run_a}" if cell_a is None else f"{axis}__{cell_b}__vs__{cell_a}"
    table = compare_table(pct_a, pct_b, pairs_frame, axis)
    return lakeio.write_arrow(table, lake, "compare", lakeio.RunRef(name, ref_b.run_date))


def main(argv: Sequence[str] | None = None) -> int:
    p = jobargs.parser(__doc__.splitlines()[0])
    p.add_argument("--axis", default="run", help="run | version | a dotted spec path such as broker.mode")
    p.add_argument("--cell-a", default=None)
    p.add_argument("--cell-b", default=None)
    args = p.parse_args(argv)
    run_a, run_b = args.run_ids[0], args.run_ids[-1]
    try:
        path = run(args.lake, run_a, run_b, args.axis, args.cell_a, args.cell_b)
    except CompareError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"compare: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
