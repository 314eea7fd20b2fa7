"""`sixnines import …` and `sixnines export …`: other tools' files in, a run in other tools' formats out.

  sixnines import omb WORKLOAD.yaml [--driver DRIVER.yaml] [-o MATRIX.yaml]
  sixnines export omb  (RUN_ID | --latest) [--lake LAKE] [--out DIR] [--interval-s 10]
  sixnines export hgrm (RUN_ID | --latest) [--lake LAKE] [--out DIR]

Bad input (a file that cannot be read, a field with no sixnines equivalent, an unknown run) is an
InteropError: one message naming the file and the field, exit code 2.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from .errors import InteropError

import_app = typer.Typer(no_args_is_help=True, help="Read other tools' files: OpenMessaging Benchmark workloads.")
export_app = typer.Typer(
    no_args_is_help=True, help="Write a run in other tools' formats: OMB results, HdrHistogram .hgrm, CSV."
)

out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)

RunIdArgument = Annotated[
    Optional[str],  # noqa: UP045 (typer needs Optional here)
    typer.Argument(help="the run's id in the lake (or --latest)", show_default=False),
]
LatestOption = Annotated[bool, typer.Option("--latest", help="the newest run in the lake")]
LakeOption = Annotated[
    str, typer.Option("--lake", envvar="SIXNINES_LAKE", help="lake root: a folder, or s3://bucket/prefix")
]
OutDirOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("--out", help="write here instead of LAKE/exports/run_date=D/run_id=R/<format>/"),
]


@import_app.command("omb")
def import_omb(
    workload: Annotated[Path, typer.Argument(help="an OMB workload file (workloads/*.yaml)")],
    driver: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--driver", help="an OMB driver file (driver-kafka/*.yaml, driver-nats/nats.yaml)"),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("-o", "--output", help="write the matrix here (default: print it)"),
    ] = None,
    system: Annotated[str, typer.Option(help="without --driver: kafka or nats")] = "kafka",
    version: Annotated[str, typer.Option(help="broker version, or 'latest'")] = "latest",
    name: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(help="matrix name (default: omb_<workload name>)"),
    ] = None,
    warmup_s: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--warmup-s", help="override warmupDurationMinutes (recorded in the mapping)"),
    ] = None,
    measure_s: Annotated[
        Optional[float],  # noqa: UP045
        typer.Option("--measure-s", help="override testDurationMinutes (recorded in the mapping)"),
    ] = None,
) -> None:
    """Turn an OMB workload (and driver) into a sixnines matrix; every field's fate is recorded in its
    `origin:`, every field that cannot be carried is a warning, and what sixnines cannot measure is refused."""
    from .interop.omb_workload import ImportOptions, import_omb, matrix_yaml

    options = ImportOptions(system, version, name, warmup_s, measure_s)
    driver_raw = _read_yaml(driver) if driver else None
    imported = import_omb(_read_yaml(workload), str(workload), driver_raw, str(driver) if driver else None, options)
    for warning in imported.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")
    text = matrix_yaml(imported)
    cells = ", ".join(f"{c.id} {c.label}" for c in imported.matrix.cells)
    if output is None:
        print(text, end="")
        err.print(f"cells: {escape(cells)}")
        return
    output.write_text(text)
    out.print(f"wrote {output}: matrix '{imported.matrix.name}', cells: {escape(cells)}")


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise InteropError(str(path), ["file not found"]) from None
    except yaml.YAMLError as exc:
        raise InteropError(str(path), [f"not valid YAML: {exc}"]) from None
    if not isinstance(raw, dict):
        raise InteropError(str(path), [f"top level must be a mapping, got {type(raw).__name__}"])
    return raw


@export_app.command("omb")
def export_omb(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    out_dir: OutDirOption = None,
    interval_s: Annotated[float, typer.Option("--interval-s", help="OMB's reporting interval (its own is 10)")] = 10.0,
) -> None:
    """Write RUN_ID's cells as OpenMessaging Benchmark results (one TestResult JSON per run of a cell)."""
    from .interop.export import export_omb as do_export

    _print(do_export(lake, _run(run_id, latest, lake), out_dir, interval_s))


@export_app.command("hgrm")
def export_hgrm(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    out_dir: OutDirOption = None,
) -> None:
    """Write RUN_ID's latencies as HdrHistogram `.hgrm` files (cell × metric × basis) and its tables as CSV."""
    from .interop.export import export_hgrm as do_export

    _print(do_export(lake, _run(run_id, latest, lake), out_dir))


def _print(export: Any) -> None:
    shown = [f for f in export.files if not f.startswith("sixnines/")]
    out.print(f"run {export.run_id}: {len(export.files)} file(s) in {export.folder}")
    for name in shown:
        out.print(f"  {name}")
    for reason in export.skipped:
        err.print(f"[yellow]not exported:[/] {escape(reason)}")


def _run(run_id: str | None, latest: bool, lake: str) -> str:
    if run_id and latest:
        raise InteropError("RUN_ID", [f"give a RUN_ID ({run_id}) or --latest, not both"])
    if run_id:
        return run_id
    if latest:
        return latest_run(lake)
    raise InteropError("RUN_ID", ["missing: give a run id, or --latest for the newest run in the lake"])


def latest_run(lake: str) -> str:
    """The newest run in the lake: the latest run date, and on that date the run that started last (its
    cells table's first `started_at`; the folder's time when it has none). Unified with `sixnines runs` later."""
    from .storage import lake_path

    root = lake_path(lake)
    runs = sorted((root / "raw").glob("run_date=*/run_id=*"))
    if not runs:
        raise InteropError(f"--lake {lake}", [f"no runs under {root / 'raw'}"])
    newest_date = max(r.parent.name for r in runs)
    same_day = [r for r in runs if r.parent.name == newest_date]
    return max(same_day, key=lambda r: (_started_at(root, r), r.name)).name.removeprefix("run_id=")


def _started_at(root: Any, raw_run: Any) -> str:
    """When a run started, as an ISO UTC time."""
    from .storage import read_parquet

    cells = root / "runs" / raw_run.parent.name / raw_run.name / "cells.parquet"
    try:
        return min(str(s) for s in read_parquet(cells, columns=["started_at"])["started_at"].to_pylist() if s)
    except Exception:  # no cells table yet: when the folder appeared
        mtime = os.path.getmtime(raw_run) if isinstance(raw_run, Path) else 0
        return dt.datetime.fromtimestamp(mtime, dt.UTC).isoformat()
