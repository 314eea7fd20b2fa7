"""`sixnines` (and `python -m bench_tasks`): run matrices, calibrate, manage brokers.

Errors the harness raises on purpose are printed as one clear message (no traceback) and exit with their
subsystem's code: 2 for bad input, 1 for a failed run. A run with any failed cell exits 1.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated, Optional

import click
import typer
from rich.console import Console
from rich.markup import escape

from .errors import BrokerError, SixninesError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
brokers_app = typer.Typer(no_args_is_help=True, help="Start, stop and inspect brokers on 127.0.0.1.")
app.add_typer(brokers_app, name="brokers")

# Off a terminal (CI, logs, pipes) rich would wrap at 80 columns; the percentile table needs ~100.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)

LakeOption = Annotated[Path, typer.Option("--lake", help="lake root folder")]
JsonOption = Annotated[bool, typer.Option("--json", help="print results as JSON on stdout")]


@app.command()
def run(
    matrix: Annotated[Path, typer.Argument(help="matrix file (matrices/*.yaml)")],
    lake: LakeOption = Path("lake"),
    only: Annotated[list[str] | None, typer.Option("--only", help="run only this cell id (repeatable)")] = None,
    as_json: JsonOption = False,
) -> None:
    """Run every cell of MATRIX one at a time and print its percentile tables."""
    from .matrix import load_matrix
    from .runner import run_matrix
    from .tables import print_report, report_json

    loaded = load_matrix(matrix)
    progress = err if as_json else out
    run_info, reports = run_matrix(loaded, lake, progress, only or ())
    if as_json:
        print(
            json.dumps(
                {
                    "run_id": run_info.run_id,
                    "run_date": run_info.run_date,
                    "matrix": loaded.name,
                    "cells": [report_json(r) for r in reports],
                },
                indent=2,
                default=str,
            )
        )
    else:
        out.rule("results")
        for report in reports:
            print_report(report, out)
    failed = [r for r in reports if r.status != "ok"]
    if failed:
        err.print(f"[red]{len(failed)} of {len(reports)} cell(s) failed[/]")
        raise typer.Exit(1)


@app.command()
def cells(matrix: Annotated[Path, typer.Argument(help="matrix file")], as_json: JsonOption = False) -> None:
    """Validate MATRIX and list its cells (ids, series keys, labels) without running anything."""
    from .matrix import load_matrix
    from .runner import resolve_cells

    loaded = load_matrix(matrix)
    resolved = resolve_cells(loaded)
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "cell_id": c.id,
                        "series_key": c.series_key,
                        "label": c.label,
                        "spec": c.spec.model_dump(mode="json"),
                    }
                    for c in resolved
                ],
                indent=2,
            )
        )
        return
    for c in resolved:
        out.print(f"{c.id}  {c.series_key}  {c.label}")


@app.command()
def calibrate(
    system: Annotated[str, typer.Option(help="system under test")] = "nats",
    version: Annotated[str, typer.Option(help="broker version or 'latest'")] = "latest",
    measurement: Annotated[str, typer.Option(help="rtt (request/reply) or e2e (one-way)")] = "rtt",
    rate: Annotated[float, typer.Option(help="total requests per second")] = 2000,
    connections: Annotated[int, typer.Option(help="rtt: synchronous connections")] = 100,
    message_size: Annotated[int, typer.Option(help="bytes per message")] = 64,
    warmup: Annotated[float, typer.Option(help="warmup seconds")] = 2,
    measure: Annotated[float, typer.Option(help="measure seconds")] = 30,
    cooldown: Annotated[float, typer.Option(help="cooldown seconds")] = 2,
    stall: Annotated[float, typer.Option(help="seconds the broker is frozen (SIGSTOP) mid-measure")] = 1.4,
    lake: LakeOption = Path("lake"),
    as_json: JsonOption = False,
) -> None:
    """The CTRL+Z test: freeze the broker mid-measure; corrected percentiles must show the stall."""
    from .calibrate import CalibrationSpec
    from .calibrate import calibrate as do_calibrate
    from .percentiles import PERCENTILES

    spec = CalibrationSpec(
        system, version, measurement, rate, connections, message_size, warmup, measure, cooldown, stall
    )
    result = do_calibrate(spec, lake, err if as_json else out)
    data = result.to_dict()
    if as_json:
        print(json.dumps(data, indent=2))
    else:
        from rich.table import Table

        table = Table(
            title=f"CTRL+Z calibration: {measurement}, {rate:g}/s, stall {stall} s "
            f"(observed {data['stall_observed_s'] or 0:.3f} s), {data['count']} samples"
        )
        table.add_column("percentile")
        table.add_column("corrected (from intended)", justify="right")
        table.add_column("uncorrected (from sent)", justify="right")
        for key in (*PERCENTILES, "max"):
            c, u = data["corrected"].get(key), data["uncorrected"].get(key)
            table.add_row(key, _ms(c), _ms(u))
        out.print(table)
        for check, ok in data["checks"].items():
            out.print(f"  {'[green]pass[/]' if ok else '[red]FAIL[/]'}  {check}")
        out.print(f"  data: {data['path']}")
    if result.report.status != "ok":
        err.print(f"[red]calibration cell failed:[/] {result.report.reason}")
        raise typer.Exit(1)


def _ms(value: float | None) -> str:
    return "unsupported" if value is None else f"{value:.3f} ms"


@brokers_app.command("up")
def brokers_up(
    system: Annotated[str, typer.Argument(help="nats")],
    version: Annotated[str, typer.Option(help="release or 'latest'")] = "latest",
    mode: Annotated[str, typer.Option(help="core or jetstream")] = "core",
    storage: Annotated[str, typer.Option(help="JetStream storage: memory or file")] = "memory",
    sync_interval: Annotated[str, typer.Option(help="JetStream fsync: default, always or a duration")] = "default",
) -> None:
    """Start a broker in the background on 127.0.0.1 and print how to reach it."""
    from .brokers import state
    from .brokers.nats import NatsServer
    from .paths import cache_dir
    from .systems import NatsBroker, resolve_version

    _only_nats(system)
    if (current := state.load(system)) is not None and _alive(current["pid"]):
        raise BrokerError(f"{system} is already up (pid {current['pid']}, {current['url']}); run 'brokers down' first")
    version = resolve_version(system, version)
    broker = NatsBroker(mode=mode, storage=storage, sync_interval=sync_interval)  # type: ignore[arg-type]
    server = NatsServer(version, broker, cache_dir() / "brokers" / system, tie_to_parent=False)
    endpoint = server.start()
    state.save(system, server.state())
    out.print(
        f"{system} {endpoint.version} ({mode}) up: {endpoint.url}  monitor {endpoint.monitor_url}  pid {endpoint.pid}"
    )


@brokers_app.command("down")
def brokers_down(system: Annotated[str, typer.Argument(help="nats")]) -> None:
    """Stop a broker started with `brokers up` (SIGTERM, then SIGKILL after a timeout)."""
    from .brokers import state
    from .brokers.process import stop_pid

    _only_nats(system)
    current = state.load(system)
    if current is None:
        out.print(f"{system}: nothing to stop")
        return
    stopped = stop_pid(current["pid"], "nats-server")
    shutil.rmtree(current["workdir"], ignore_errors=True)
    state.forget(system)
    out.print(f"{system}: {'stopped' if stopped else 'was not running'} (pid {current['pid']})")


@brokers_app.command("status")
def brokers_status(system: Annotated[str, typer.Argument(help="nats")] = "nats") -> None:
    """Show whether a broker started with `brokers up` is running, and what it reports about itself."""
    from .brokers import state
    from .brokers.nats import NatsServer

    _only_nats(system)
    current = state.load(system)
    if current is None or not _alive(current["pid"]):
        out.print(f"{system}: down")
        raise typer.Exit(3)
    varz = NatsServer.varz(current["monitor_url"])
    out.print(
        f"{system}: up  {current['url']}  pid {current['pid']}  version {varz.get('version')}  "
        f"connections {varz.get('connections')}  in_msgs {varz.get('in_msgs')}"
    )


@brokers_app.command("fetch")
def brokers_fetch(
    system: Annotated[str, typer.Argument(help="nats")],
    version: Annotated[Optional[str], typer.Argument(help="release to fetch into the cache")] = None,  # noqa: UP045
    list_versions: Annotated[bool, typer.Option("--list", help="list the releases this harness knows")] = False,
) -> None:
    """Fetch a broker release into the cache (verified before use), or list known releases."""
    from .brokers.nats import server_binary
    from .systems import SYSTEM_VERSIONS, resolve_version

    _only_nats(system)
    if list_versions or version is None:
        for v in SYSTEM_VERSIONS[system]:
            out.print(v)
        return
    if version != "latest" and version not in SYSTEM_VERSIONS[system]:
        raise BrokerError(f"unknown {system} version {version!r}; see 'sixnines brokers fetch {system} --list'")
    out.print(str(server_binary(resolve_version(system, version))))


def _only_nats(system: str) -> None:
    if system != "nats":
        raise BrokerError(f"unknown system {system!r}; this harness provisions: nats")


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def main() -> None:
    """Console entry point: map harness errors to a message and an exit code, never a traceback."""
    try:
        # Without standalone mode click returns (not raises) the code of a typer.Exit; pass it on.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except SixninesError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        err.print("aborted")
        sys.exit(130)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
