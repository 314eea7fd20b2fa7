"""`sixnines run`, `cells` and `calibrate`: the commands that read a matrix or drive load."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from ..systems import SYSTEMS
from .app import JsonOption, LakeOption, MatrixArgument, app, err, out

DEFAULT_SYSTEM = next(iter(SYSTEMS))


@app.command()
def run(
    matrix: MatrixArgument,
    lake: LakeOption = "lake",
    only: Annotated[list[str] | None, typer.Option("--only", help="run only this cell id (repeatable)")] = None,
    phase_scale: Annotated[
        float,
        typer.Option(
            "--phase-scale",
            min=0.001,
            help="multiply warmup, measure and cooldown (0.2 for a quick smoke run); changes the cell ids",
        ),
    ] = 1.0,
    with_report: Annotated[
        bool, typer.Option("--report", help="then build the Spark tables, the gate and the HTML report")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Run every cell of MATRIX one at a time and print its percentile tables (exit 1 if any cell failed)."""
    from ..cell.runner import run_matrix
    from ..cell.tables import print_report, report_json
    from ..spec.matrix import load_matrix

    loaded = load_matrix(matrix)
    progress = err if as_json else out
    run_info, reports = run_matrix(loaded, lake, progress, only or (), phase_scale=phase_scale)
    if as_json:
        cells = [report_json(r) for r in reports]
        document = {"run_id": run_info.run_id, "run_date": run_info.run_date, "matrix": loaded.name, "cells": cells}
        print(json.dumps(document, indent=2, default=str))
    else:
        out.rule("results")
        for report in reports:
            print_report(report, out)
    failed = [r for r in reports if r.status != "ok"]
    if failed:
        err.print(f"[red]{len(failed)} of {len(reports)} cell(s) failed[/]")
    published = True
    if with_report:
        from .results import analyze_and_report

        published = analyze_and_report(lake, run_info.run_id, progress)
    if failed or not published:
        raise typer.Exit(1)


@app.command()
def cells(matrix: MatrixArgument, as_json: JsonOption = False) -> None:
    """Validate MATRIX and list its cells and the sweep's estimated wall time, running nothing.

    Each line: cell id, series key (the id without the version), label. A bad file exits 2 with every
    problem found, each naming the field."""
    from ..capacity.search import max_search_steps
    from ..cell.runner import estimated_wall_s, resolve_cells
    from ..spec.matrix import load_matrix
    from ..spec.repeats import expand_repeats

    loaded = load_matrix(matrix)
    resolved = resolve_cells(loaded)
    if as_json:
        listed = [
            {
                "cell_id": c.id,
                "series_key": c.series_key,
                "label": c.label,
                "repeats": c.repeats,
                "spec": c.spec.model_dump(mode="json"),
            }
            for c in resolved
        ]
        print(json.dumps(listed, indent=2))
        return
    runs = len(expand_repeats(resolved))
    wall_min = estimated_wall_s(resolved) / 60
    repeated = f" ({runs} runs with repeats)" if runs > len(resolved) else ""
    if loaded.capacity is not None:
        steps = max_search_steps(loaded.capacity, [c.spec.workload.rate_per_s for c in resolved])
        out.print(f"matrix {loaded.name}: a capacity search of {len(resolved)} cell(s), up to {steps} steps each")
        out.print(
            f"  each step about {wall_min / len(resolved):.1f} min: up to {wall_min * steps:.0f} min of wall time"
        )
    else:
        out.print(f"matrix {loaded.name}: {len(resolved)} cell(s){repeated}, about {wall_min:.1f} min of wall time")
    out.print(f"{'cell id':<14}{'series key':<14}label")
    for c in resolved:
        out.print(f"{c.id:<14}{c.series_key:<14}{c.label}" + (f"  (×{c.repeats} repeats)" if c.repeats > 1 else ""))


@app.command()
def calibrate(
    system: Annotated[str, typer.Option(help="system under test (default: the first registered)")] = DEFAULT_SYSTEM,
    version: Annotated[str, typer.Option(help="broker version or 'latest'")] = "latest",
    measurement: Annotated[
        Optional[str],  # noqa: UP045 (typer needs Optional here)
        typer.Option(help="rtt (request/reply) or e2e (one-way); default: the system's own calibration shape"),
    ] = None,
    rate: Annotated[float, typer.Option(help="total requests per second")] = 2000,
    connections: Annotated[int, typer.Option(help="rtt: synchronous connections")] = 100,
    message_size: Annotated[int, typer.Option(help="bytes per message")] = 64,
    warmup: Annotated[float, typer.Option(help="warmup seconds")] = 2,
    measure: Annotated[float, typer.Option(help="measure seconds")] = 30,
    cooldown: Annotated[float, typer.Option(help="cooldown seconds")] = 2,
    stall: Annotated[float, typer.Option(help="seconds the broker is frozen (SIGSTOP) mid-measure")] = 1.4,
    lake: LakeOption = "lake",
    as_json: JsonOption = False,
) -> None:
    """The CTRL+Z test: freeze the broker mid-measure; corrected percentiles must show the stall."""
    from ..cell.calibrate import CalibrationSpec
    from ..cell.calibrate import calibrate as do_calibrate
    from ..systems import system as system_named

    measurement = measurement or system_named(system).calibration_measurement
    spec = CalibrationSpec(
        system, version, measurement, rate, connections, message_size, warmup, measure, cooldown, stall
    )
    result = do_calibrate(spec, lake, err if as_json else out)
    data = result.to_dict()
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        _print_calibration(data, measurement, rate, stall)
    if result.report.status != "ok":
        err.print(f"[red]calibration cell failed:[/] {result.report.reason}")
        raise typer.Exit(1)


def _print_calibration(data: dict, measurement: str, rate: float, stall: float) -> None:
    from rich.table import Table

    from ..core.percentiles import PERCENTILES

    table = Table(
        title=f"CTRL+Z calibration: {measurement}, {rate:g}/s, stall {stall} s "
        f"(observed {data['stall_observed_s'] or 0:.3f} s), {data['count']} samples"
    )
    table.add_column("percentile")
    table.add_column("corrected (from intended)", justify="right")
    table.add_column("uncorrected (from sent)", justify="right")
    for key in (*PERCENTILES, "max"):
        table.add_row(key, _ms(data["corrected"].get(key)), _ms(data["uncorrected"].get(key)))
    out.print(table)
    for check, ok in data["checks"].items():
        out.print(f"  {'[green]pass[/]' if ok else '[red]FAIL[/]'}  {check}")
    out.print(f"  data: {data['path']}")


def _ms(value: float | None) -> str:
    return "unsupported" if value is None else f"{value:.3f} ms"
