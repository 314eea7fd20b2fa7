"""`sixnines capacity`: the highest rate each cell of a matrix holds under latency objectives."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..capacity.search import MIN_RESOLUTION
from .app import JsonOption, LakeOption, MatrixArgument, app, err, out

if TYPE_CHECKING:
    from ..capacity.run import Bounds
    from ..spec.capacity import CapacitySpec, Objective


@app.command()
def capacity(
    matrix: MatrixArgument,
    slo: Annotated[
        list[str] | None,
        typer.Option("--slo", help="objective, e.g. 'e2e p99 < 10ms' (repeatable; default: the matrix's capacity:)"),
    ] = None,
    max_rate: Annotated[
        Optional[float],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--max-rate", help="highest rate to offer, msg/s (default: the matrix's capacity:)", min=0.001),
    ] = None,
    start_rate: Annotated[
        Optional[float],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--start-rate", help="first rate to offer (default: each cell's own rate_per_s)", min=0.001),
    ] = None,
    factor: Annotated[
        Optional[float],  # noqa: UP045 (typer needs Optional here)
        typer.Option(help="geometric step until a rate fails [default: 2]", min=1.1),
    ] = None,
    resolution: Annotated[
        Optional[float],  # noqa: UP045 (typer needs Optional here)
        typer.Option(help="bisect until within this ratio, 0.01 at least [default: 0.05]", min=MIN_RESOLUTION, max=1),
    ] = None,
    step_s: Annotated[
        Optional[float],  # noqa: UP045 (typer needs Optional here)
        typer.Option("--step-s", help="measure seconds of each step (default: each cell's measure_s)", min=0.1),
    ] = None,
    only: Annotated[list[str] | None, typer.Option("--only", help="search only this cell id (repeatable)")] = None,
    with_report: Annotated[
        bool, typer.Option("--report", help="then build the Spark tables, the gate and the report")
    ] = False,
    lake: LakeOption = "lake",
    as_json: JsonOption = False,
) -> None:
    """For each cell of MATRIX, offer rising rates (geometric steps, then bisection) until an objective breaks,
    messages are lost, consumers fall behind, or the harness saturates; print the highest rate that held.

    Each step is a full cell (warmup, measure, cooldown) on fresh brokers, landed like any other. Exit 1 when
    a search ended on the harness's own saturation or a failed cell: that capacity is not the broker's."""
    from ..capacity.run import search_capacity
    from ..cell.runner import select_cells
    from ..lake.layout import Lake, RunInfo
    from ..spec.matrix import load_matrix

    loaded = load_matrix(matrix)
    given = {"start_rate_per_s": start_rate, "factor": factor, "resolution": resolution, "step_s": step_s}
    objectives, bounds = _search_terms(loaded.capacity, slo, max_rate, given)
    cells = select_cells(loaded, only or ())
    run, store = RunInfo.new(), Lake(lake)
    progress = err if as_json else out
    results = [search_capacity(c, objectives, bounds, store, run, progress) for c in cells]  # each recorded as it ends
    where = store.run_dir(run) / "capacity.html"
    if as_json:
        print(json.dumps({"run_id": run.run_id, "cells": results}, indent=2, default=str))
    else:
        _print_results(results)
    progress.print(f"capacity results: {where}")
    published = True
    if with_report:
        from .results import analyze_and_report

        published = analyze_and_report(lake, run.run_id, progress)
    if not all(r["broker_bound"] or r["limit"] == "max-rate" for r in results):
        err.print("[red]a search ended on the harness or a failed cell: that capacity is not the broker's[/]")
        raise typer.Exit(1)
    if not published:
        raise typer.Exit(1)


def _print_results(results: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table(title="capacity at the objectives")
    for column in ("cell", "capacity (msg/s)", "limit", "steps", "why"):
        table.add_column(column)
    for r in results:
        held = "none held" if r["capacity_per_s"] is None else f"{r['capacity_per_s']:,.0f}"
        if not r["broker_bound"] and r["limit"] != "max-rate":
            held += " (not the broker's)"
        table.add_row(r["label"], held, r["limit"], str(len(r["steps"])), r["limit_why"])
    out.print(table)


def _search_terms(
    spec: CapacitySpec | None,
    slo: list[str] | None,
    max_rate: float | None,
    given: dict[str, float | None],
) -> tuple[list[Objective], Bounds]:
    """The objectives and bounds: each option given on the command line (`given`: Bounds fields), else the
    matrix's `capacity:`."""
    from ..capacity.run import Bounds
    from ..spec.capacity import parse_objective

    texts = slo or (spec.objectives if spec else [])
    if not texts:
        raise typer.BadParameter("required: the matrix has no capacity.objectives", param_hint="--slo")
    highest = max_rate or (spec.max_rate_per_s if spec else None)
    if highest is None:
        raise typer.BadParameter("required: the matrix has no capacity.max_rate_per_s", param_hint="--max-rate")
    given = {"max_rate_per_s": highest, **given}
    bounds = replace(Bounds.of(spec) if spec else Bounds(highest), **{k: v for k, v in given.items() if v is not None})
    return [parse_objective(text) for text in texts], bounds
