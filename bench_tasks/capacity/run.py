"""Running a capacity search: each step is the matrix cell at another offered rate, run start to landed like any
cell (its raw samples in the lake under its own cell id), on fresh brokers. Fresh, not reused: a step that broke
leaves a backlog, a grown heap or a stalled follower behind, and the next step must not pay for it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..cell.runner import run_cell
from ..errors import SixninesError
from ..lake.layout import Lake, RunInfo
from ..spec.capacity import CapacitySpec, Objective
from ..spec.cell import cell_id, series_key
from ..spec.matrix import Cell
from .judge import judge
from .search import Search, Step


@dataclass(frozen=True)
class Bounds:
    """Where a search starts and stops: `start_rate_per_s` (default: the cell's own rate), `max_rate_per_s`,
    the geometric `factor` of the first phase and the bisection's `resolution` (0.05: within 5 %); `step_s`,
    the measure phase of every step (default: the cell's `measure_s`)."""

    max_rate_per_s: float
    start_rate_per_s: float | None = None
    factor: float = 2.0
    resolution: float = 0.05
    step_s: float | None = None

    @classmethod
    def of(cls, spec: CapacitySpec) -> Bounds:
        """A matrix's `capacity:` bounds."""
        return cls(spec.max_rate_per_s, spec.start_rate_per_s, spec.factor, spec.resolution, spec.step_s)


def at_rate(cell: Cell, rate_per_s: float, step_s: float | None = None) -> Cell:
    """The same cell offered `rate_per_s` (and measured `step_s` seconds when given; validated again: a rate
    changes what a cell can hold), with its own id."""
    raw = cell.spec.model_dump(mode="json")
    raw["workload"]["rate_per_s"] = rate_per_s
    if step_s is not None:
        raw["workload"]["measure_s"] = step_s
    spec = type(cell.spec).model_validate(raw)
    return cell.model_copy(update={"spec": spec, "id": cell_id(spec), "series_key": series_key(spec)})


def search_capacity(
    cell: Cell, objectives: Sequence[Objective], bounds: Bounds, lake: Lake, run: RunInfo, console: Console
) -> dict[str, Any]:
    """One cell's search, each step printed as it ends; the result (`Search.result`) with the cell named."""
    start = bounds.start_rate_per_s or cell.spec.workload.rate_per_s
    search = Search(start, bounds.max_rate_per_s, bounds.factor, bounds.resolution)
    while (rate := search.next_rate()) is not None:
        console.rule(f"capacity {cell.id}: step {len(search.steps) + 1} at {rate:,.0f}/s")
        step = _run_step(at_rate(cell, rate, bounds.step_s), objectives, lake, run, console)
        search.record(step)
        colour = "green" if step.passed else "red"
        console.print(f"[{colour}]{step.verdict}[/] at {rate:,.0f}/s: {escape(step.why)}", highlight=False)
    return {
        "cell_id": cell.id,
        "series_key": cell.series_key,
        "label": cell.label,
        "system": cell.spec.system,
        "version": cell.spec.version,
        "objectives": [o.text for o in objectives],
        "bounds": asdict(bounds),
        **search.result(),
    }


def _run_step(cell: Cell, objectives: Sequence[Objective], lake: Lake, run: RunInfo, console: Console) -> Step:
    """One step, judged; a cell that could not even start is a failed step (the search ends there, its result
    and every step before it kept), not a search lost to an exception."""
    try:
        report = run_cell(cell, lake, run, console)
    except SixninesError as exc:
        return Step(cell.spec.workload.rate_per_s, "failed", str(exc), cell.id)
    return judge(report, objectives)


def write_capacity(lake: Lake, run: RunInfo, results: list[dict[str, Any]]) -> str:
    """The run's capacity results beside its cells: `capacity.json`, and `capacity.html` (the charts); where."""
    from ..report.capacity_view import capacity_page

    folder = lake.run_dir(run)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "capacity.json").write_text(json.dumps({"run_id": run.run_id, "cells": results}, indent=2, default=str))
    (folder / "capacity.html").write_text(capacity_page(run.run_id, results))
    return str(folder / "capacity.html")
