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
from ..lake.layout import Lake, RunInfo, write_json
from ..lake.storage import write_text
from ..spec.capacity import CapacitySpec, Objective
from ..spec.cell import cell_id, series_key
from ..spec.matrix_model import Cell
from .judge import judge
from .search import Search, Step

CAPACITY_FILE = "capacity.json"


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
    changes what a cell can hold), with its own id. A background workload that `follows_rate` is scaled by the
    same ratio: its share of the load stays what the matrix says at every step (OMB's other topics)."""
    raw = cell.spec.model_dump(mode="json")
    ratio = rate_per_s / cell.spec.workload.rate_per_s
    raw["workload"]["rate_per_s"] = rate_per_s
    for background in raw.get("background", {}).values():
        if background.get("follows_rate"):
            background["rate_per_producer_per_s"] *= ratio
    if step_s is not None:
        raw["workload"]["measure_s"] = step_s
    spec = type(cell.spec).model_validate(raw)
    return cell.model_copy(update={"spec": spec, "id": cell_id(spec), "series_key": series_key(spec)})


def search_capacity(
    cell: Cell, objectives: Sequence[Objective], bounds: Bounds, lake: Lake, run: RunInfo, console: Console
) -> dict[str, Any]:
    """One cell's search, each step printed as it ends; the result (`Search.result`) with the cell named, also
    recorded in the run's capacity.json as soon as the search ends (`record_search`)."""
    start = bounds.start_rate_per_s or cell.spec.workload.rate_per_s
    search = Search(start, bounds.max_rate_per_s, bounds.factor, bounds.resolution)
    while (rate := search.next_rate()) is not None:
        console.rule(f"capacity {cell.id}: step {len(search.steps) + 1} at {rate:,.0f}/s")
        step = _run_step(at_rate(cell, rate, bounds.step_s), objectives, lake, run, console)
        search.record(step)
        colour = "green" if step.passed else "red"
        console.print(f"[{colour}]{step.verdict}[/] at {rate:,.0f}/s: {escape(step.why)}", highlight=False)
    result = {
        "cell_id": cell.id,
        "series_key": cell.series_key,
        "label": cell.label,
        "system": cell.spec.system,
        "version": cell.spec.version,
        "objectives": [o.text for o in objectives],
        "bounds": asdict(bounds),
        **search.result(),
    }
    record_search(lake, run, result)
    return result


def _run_step(cell: Cell, objectives: Sequence[Objective], lake: Lake, run: RunInfo, console: Console) -> Step:
    """One step, judged; a cell that could not even start is a failed step (the search ends there, its result
    and every step before it kept), not a search lost to an exception."""
    try:
        report = run_cell(cell, lake, run, console)
    except SixninesError as exc:
        return Step(cell.spec.workload.rate_per_s, "failed", str(exc), cell.id)
    return judge(report, objectives)


def record_search(lake: Lake, run: RunInfo, result: dict[str, Any]) -> str:
    """Add one finished search to the run's capacity results (in place of an earlier one of the same cell): a
    run stopped later (Ctrl-C, a task's timeout) keeps every search that ended, and still reads as a capacity
    run. Where the page is."""
    path = lake.run_dir(run) / CAPACITY_FILE
    earlier = json.loads(path.read_text()).get("cells") or [] if path.exists() else []
    return write_capacity(lake, run, [r for r in earlier if r["cell_id"] != result["cell_id"]] + [result])


def write_capacity(lake: Lake, run: RunInfo, results: list[dict[str, Any]]) -> str:
    """The run's capacity results beside its cells: `capacity.json`, and `capacity.html` (the charts), each
    replaced atomically (a reader, or a write cut short, never leaves half a file); where the page is."""
    from ..report.capacity_view import capacity_page

    folder = lake.run_dir(run)
    write_json(folder / CAPACITY_FILE, {"run_id": run.run_id, "cells": results})
    write_text(folder / "capacity.html", capacity_page(run.run_id, results))
    return str(folder / "capacity.html")
