"""`sixnines import …` and `sixnines export …`: other tools' files in, a run in other tools' formats out.

  sixnines import omb WORKLOAD.yaml [--driver DRIVER.yaml] [-o/--out MATRIX.yaml]
  sixnines export omb  (RUN_ID | --latest) [--lake LAKE] [-o/--out DIR] [--interval-s 10]
  sixnines export hgrm (RUN_ID | --latest) [--lake LAKE] [-o/--out DIR]

Every command here takes `-o` and `--out` for where it writes (`import omb` also `--output`, its older name).

Bad input (a file that cannot be read, a field with no sixnines equivalent, an unknown run) is an
InteropError: one message naming the file and the field, exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
import yaml
from rich.markup import escape

from ..errors import InteropError
from ..lake.runs import resolve_run_id
from ..systems import SYSTEMS
from .app import LakeOption, LatestOption, RunIdArgument, app, err, out

if TYPE_CHECKING:
    from ..interop.omb_workload import Imported

import_app = typer.Typer(no_args_is_help=True, help="Read other tools' files: OpenMessaging Benchmark workloads.")
export_app = typer.Typer(
    no_args_is_help=True, help="Write a run in other tools' formats: OMB results, HdrHistogram .hgrm, CSV."
)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")

_OMB_SYSTEMS = [name for name, system in SYSTEMS.items() if system.omb_driver() is not None]
OutDirOption = Annotated[
    Optional[Path],  # noqa: UP045
    typer.Option("-o", "--out", help="write here instead of LAKE/exports/run_date=D/run_id=R/<format>/"),
]


@import_app.command("omb")
def import_omb(
    workload: Annotated[Path, typer.Argument(help="an OMB workload file (workloads/*.yaml)")],
    driver: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("--driver", help="an OMB driver file (driver-*/*.yaml): its driverClass names the system"),
    ] = None,
    output: Annotated[
        Optional[Path],  # noqa: UP045
        typer.Option("-o", "--out", "--output", help="write the matrix here (default: print it)"),
    ] = None,
    system: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option(
            help=f"the system to map onto ({', '.join(_OMB_SYSTEMS)}): without --driver, or one that also reads "
            "the driver's class"
        ),
    ] = None,
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
    from ..interop.omb_workload import ImportOptions, import_omb, matrix_yaml

    options = ImportOptions(system, version, name, warmup_s, measure_s)
    driver_raw = _read_yaml(driver) if driver else None
    imported = import_omb(_read_yaml(workload), str(workload), driver_raw, str(driver) if driver else None, options)
    _report(imported)
    text = matrix_yaml(imported)
    cells = ", ".join(f"{c.id} {c.label}" for c in imported.matrix.cells)
    if output is None:
        print(text, end="")
        err.print(f"cells: {escape(cells)}")
        return
    output.write_text(text)
    out.print(f"wrote {output}: matrix '{imported.matrix.name}', cells: {escape(cells)}")


def _report(imported: Imported) -> None:
    """On stderr: what each OMB field became (or why it set nothing), then what could not be carried. The same
    account, with every field, is the matrix's `origin:`; secrets are shown redacted in both."""
    err.print("mapped (the matrix's origin: keeps this account):")
    for entry in imported.mapped:
        if not entry.left_out:  # each is a warning below
            err.print(f"  {escape(entry.line())}")
    for warning in imported.warnings:
        err.print(f"[yellow]warning:[/] {escape(warning)}")


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
    from ..interop.export import export_omb as do_export

    _print(do_export(lake, resolve_run_id(lake, run_id, latest), out_dir, interval_s))


@export_app.command("hgrm")
def export_hgrm(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    out_dir: OutDirOption = None,
) -> None:
    """Write RUN_ID's latencies as HdrHistogram `.hgrm` files (cell × metric × basis) and its tables as CSV."""
    from ..interop.export import export_hgrm as do_export

    _print(do_export(lake, resolve_run_id(lake, run_id, latest), out_dir))


def _print(export: Any) -> None:
    shown = [f for f in export.files if not f.startswith("sixnines/")]
    out.print(f"run {export.run_id}: {len(export.files)} file(s) in {export.folder}")
    for name in shown:
        out.print(f"  {name}")
    for reason in export.skipped:
        err.print(f"[yellow]not exported:[/] {escape(reason)}")
