"""Which cells a ratio chart may divide, and the ratios themselves.

A ratio B/A only means something when A and B differ in one known way (pyperf refuses to compare runs
whose checked metadata differ; STYLE 6). Inside one run, two cells are comparable when their specs differ
in exactly one field (a version, a storage mode, a rate). Across two runs, cells pair by series key (the
spec without the version), so a comparison follows the same cell across nights or releases. When nothing
pairs, the refusal names the fields that differ, so the user sees why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.percentiles import PERCENTILES
from ..errors import SixninesError

RATIO_KEYS: tuple[str, ...] = (*PERCENTILES, "max")


class ReportError(SixninesError):
    """A report cannot be built as asked (unknown run, nothing to compare). Exit 2: the request is wrong."""

    exit_code = 2


@dataclass(frozen=True)
class CellKey:
    """What pairing needs to know of a cell: its identity and its spec (as landed in result.json)."""

    run_id: str
    cell_id: str
    series_key: str
    label: str
    spec: Mapping[str, Any]
    repeat: int = 1
    repeats: int = 1

    @property
    def instance(self) -> str:
        """Unique within a run: the cell id, with `-rK` for repeat K of a repeated cell (matrix.Cell.instance)."""
        return self.cell_id if self.repeats == 1 else f"{self.cell_id}-r{self.repeat}"

    @property
    def title(self) -> str:
        return self.label + (f" · repeat {self.repeat}/{self.repeats}" if self.repeats > 1 else "")


@dataclass(frozen=True)
class Pair:
    """B is compared with A; `differs` names the spec fields in which they differ (dotted paths)."""

    a: CellKey
    b: CellKey
    differs: tuple[str, ...]


def flatten(spec: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """`{"broker": {"mode": "core"}}` → `{"broker.mode": '"core"'}`; leaves JSON-encoded so lists compare."""
    out: dict[str, str] = {}
    for key, value in spec.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = json.dumps(value, sort_keys=True)
    return out


def spec_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    """The dotted spec fields whose values differ (a field present on one side only differs too)."""
    fa, fb = flatten(a), flatten(b)
    return tuple(sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)))


def pairs_within_run(cells: Sequence[CellKey]) -> list[Pair]:
    """Every two cells of one run whose specs differ in exactly one field, A before B in run order. Repeated
    cells pair repeat with repeat (A r2 with B r2), so every ratio divides two runs made side by side."""
    pairs = []
    for i, a in enumerate(cells):
        for b in cells[i + 1 :]:
            if a.repeat != b.repeat:
                continue
            differs = spec_differences(a.spec, b.spec)
            if len(differs) == 1:
                pairs.append(Pair(a, b, differs))
    return pairs


def pairs_across_runs(run_a: Sequence[CellKey], run_b: Sequence[CellKey]) -> list[Pair]:
    """Cells of run B paired with the cell of run A that has the same series key.

    Raises ReportError naming the differing fields of the closest cells when no series key is shared."""
    by_key = {(c.series_key, c.repeat): c for c in run_a}  # repeat K of a repeated cell with repeat K
    pairs = [
        Pair(by_key[b.series_key, b.repeat], b, spec_differences(by_key[b.series_key, b.repeat].spec, b.spec))
        for b in run_b
        if (b.series_key, b.repeat) in by_key
    ]
    if pairs:
        return pairs
    raise ReportError(refusal(run_a, run_b))


def refusal(run_a: Sequence[CellKey], run_b: Sequence[CellKey]) -> str:
    """Why two runs cannot be compared: no shared series key, and what differs between their closest cells."""
    ra = run_a[0].run_id if run_a else "A"
    rb = run_b[0].run_id if run_b else "B"
    if not run_a or not run_b:
        empty = ra if not run_a else rb
        return f"cannot compare runs {ra} and {rb}: run {empty} has no cells"
    differs = min((spec_differences(a.spec, b.spec) for a in run_a for b in run_b), key=len)
    fields = ", ".join(f for f in differs if f != "version") or "version only"
    return (
        f"cannot compare runs {ra} and {rb}: no cell of one shares a series key with a cell of the other "
        f"(the closest cells differ in: {fields}); a comparison pairs cells that differ at most in version"
    )


def ratios(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> dict[str, float | None]:
    """B/A per percentile (and max); None where either side is unsupported or A is zero."""
    out: dict[str, float | None] = {}
    for key in RATIO_KEYS:
        va, vb = a.get(key), b.get(key)
        out[key] = None if va is None or vb is None or va == 0 else vb / va
    return out
