"""`sixnines cell …` (the detached steps Airflow's tasks start) and `netns-clean`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .app import app, cell_app, out


@cell_app.command("drive")
def cell_drive(work: Annotated[Path, typer.Argument(help="the cell's work folder, written by provision")]) -> None:
    """Drive a provisioned cell's whole schedule (what Airflow's warmup task starts, detached).

    Writes status.json every second and cellrun.json at the end; exit 1 if the cell failed."""
    from ..cell.generator import main as generator

    code = generator([str(work)])
    if code:
        raise typer.Exit(code)


@cell_app.command("host")
def cell_host(
    folder: Annotated[str, typer.Argument(help="the cell's hosts folder in the lake (path or s3:// URI)")],
    host: Annotated[str, typer.Argument(help="the load-generator host this process stands for")],
    staging: Annotated[Path, typer.Argument(help="a local folder for this host's samples")],
) -> None:
    """Drive one host's share of a cell whose load runs on real hosts.

    `sixnines run` starts one per host; in Airflow each host's generate task does the same on its queue.
    Exit 1 if the cell failed on this host."""
    import signal

    from ..cell.hostparts import run_host_part
    from ..errors import CellError
    from ..lake.storage import lake_path

    def stop(signum: int, frame: object) -> None:
        raise CellError("?", f"host {host}: generator stopped by signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, stop)
    console = Console(file=sys.stdout, width=120, force_terminal=False, no_color=True)
    facts = run_host_part(lake_path(folder), host, staging, console)
    console.print(f"host {host}: {facts['status']}" + (f": {facts['reason']}" if facts["reason"] else ""))
    if facts["status"] != "ok":
        raise typer.Exit(1)


@app.command("netns-clean")
def netns_clean(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="only list what would be removed")] = False,
) -> None:
    """Remove network namespaces a hard-killed run left behind.

    Every `sixnines-<token>-*` namespace of a run token in which no process runs. Cells remove their own. A cell
    being built has idle namespaces for a moment too, so this waits while a cell holds the host, and no cell
    starts until it is done."""
    from ..cell.hostlease import host_idle
    from ..topology import netns

    with host_idle(on_wait=lambda why: out.print(f"waiting: {why}", highlight=False)):
        stale = netns.stale_tokens()
        names = sorted(n for group in stale.values() for n in group)
        if dry_run:
            out.print("\n".join(names) if names else "no stale namespaces")
            return
        removed = netns.clean_stale()
    out.print(f"removed {len(removed)} namespace(s)" + (": " + ", ".join(sorted(removed)) if removed else ""))
