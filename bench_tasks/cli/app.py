"""The `sixnines` application object, its consoles and the options every command group shares.

Usage errors (unknown command or option, a missing argument, a bad value) are typer's own: one message naming
the thing, the usage line, exit 2. Errors the harness raises on purpose are printed as one line by `main`
and exit with their subsystem's code; nothing a user can type ends in a traceback.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import SixninesError

HELP = (
    "Coordinated-omission-free latency benchmarks for message brokers.\n\n"
    "Start with `sixnines run matrices/quick.yaml --report`; `sixnines runs` lists what the lake holds.\n\n"
    "Exit codes: 0 ok, 1 a cell or run failed, 2 bad input (usage, matrix, unknown run), 3 brokers down "
    "(`brokers status`), 4 a regression alert."
)
CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(add_completion=False, no_args_is_help=True, help=HELP, context_settings=CONTEXT)
brokers_app = typer.Typer(no_args_is_help=True, help="Start, stop and inspect brokers on 127.0.0.1.")
app.add_typer(brokers_app, name="brokers")
cell_app = typer.Typer(no_args_is_help=True, help="One cell's detached steps (what Airflow's tasks start).")
app.add_typer(cell_app, name="cell")

# Off a terminal (CI, logs, pipes) rich would wrap at 80 columns; the percentile table needs ~100.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)

# A string, not a Path: `s3://bucket/prefix` would lose a slash as a Path (bench_tasks.lake.storage.lake_path).
LakeOption = Annotated[
    str,
    typer.Option("--lake", envvar="SIXNINES_LAKE", help="lake root: a folder, or s3://bucket/prefix"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print results as JSON on stdout")]
RunIdArgument = Annotated[
    Optional[str],  # noqa: UP045 (typer needs Optional here)
    typer.Argument(metavar="[RUN_ID]", help="a run id, as `sixnines runs` lists them", show_default=False),
]
LatestOption = Annotated[bool, typer.Option("--latest", help="the newest run in the lake instead of a RUN_ID")]
MatrixArgument = Annotated[
    Path, typer.Argument(metavar="MATRIX", help="matrix file (matrices/*.yaml)", show_default=False)
]


def _version(value: bool) -> None:
    if value:
        out.print(f"sixnines {metadata.version('sixnines')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
) -> None:
    """Coordinated-omission-free latency benchmarks for message brokers."""


def main() -> None:
    """Console entry point: typer reports usage errors itself (exit 2); harness errors become one message."""
    try:
        app(prog_name="sixnines")
    except SixninesError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
