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

from .cli_interop import export_app, import_app
from .errors import BrokerError, SixninesError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
brokers_app = typer.Typer(no_args_is_help=True, help="Start, stop and inspect brokers on 127.0.0.1.")
app.add_typer(brokers_app, name="brokers")
cell_app = typer.Typer(no_args_is_help=True, help="One cell's detached steps (what Airflow's tasks start).")
app.add_typer(cell_app, name="cell")
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")

# Off a terminal (CI, logs, pipes) rich would wrap at 80 columns; the percentile table needs ~100.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 120)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 120)

# A string, not a Path: `s3://bucket/prefix` would lose a slash as a Path (bench_tasks.storage.lake_path).
LakeOption = Annotated[str, typer.Option("--lake", help="lake root: a folder, or s3://bucket/prefix")]
JsonOption = Annotated[bool, typer.Option("--json", help="print results as JSON on stdout")]


@app.command()
def run(
    matrix: Annotated[Path, typer.Argument(help="matrix file (matrices/*.yaml)")],
    lake: LakeOption = "lake",
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
                        "repeats": c.repeats,
                        "spec": c.spec.model_dump(mode="json"),
                    }
                    for c in resolved
                ],
                indent=2,
            )
        )
        return
    for c in resolved:
        out.print(f"{c.id}  {c.series_key}  {c.label}" + (f"  (×{c.repeats} repeats)" if c.repeats > 1 else ""))


@app.command()
def calibrate(
    system: Annotated[str, typer.Option(help="system under test")] = "nats",
    version: Annotated[str, typer.Option(help="broker version or 'latest'")] = "latest",
    measurement: Annotated[
        Optional[str],  # noqa: UP045 (typer needs Optional here)
        typer.Option(help="rtt (request/reply) or e2e (one-way); default rtt for nats, e2e for kafka"),
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
    from .calibrate import CalibrationSpec
    from .calibrate import calibrate as do_calibrate
    from .percentiles import PERCENTILES

    measurement = measurement or ("e2e" if system == "kafka" else "rtt")
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


SYSTEMS = ("nats", "kafka")


@brokers_app.command("up")
def brokers_up(
    system: Annotated[str, typer.Argument(help="nats or kafka")],
    version: Annotated[str, typer.Option(help="release or 'latest'")] = "latest",
    mode: Annotated[str, typer.Option(help="nats: core or jetstream")] = "core",
    storage: Annotated[str, typer.Option(help="nats JetStream storage: memory or file")] = "memory",
    sync_interval: Annotated[str, typer.Option(help="nats JetStream fsync: default, always or a duration")] = "default",
    brokers: Annotated[int, typer.Option(help="kafka: 1 or 3 KRaft nodes")] = 1,
    servers: Annotated[int, typer.Option(help="nats: 1 server, or a 3-node cluster (JetStream only)")] = 1,
) -> None:
    """Start brokers in the background on 127.0.0.1 and print how to reach them."""
    from .brokers import state
    from .paths import cache_dir
    from .systems import resolve_version

    _known_system(system)
    if (current := state.load(system)) is not None and any(_alive(pid) for pid in _state_pids(current)):
        raise BrokerError(f"{system} is already up (pids {_state_pids(current)}); run 'sixnines brokers down {system}'")
    version = resolve_version(system, version)
    workdir = cache_dir() / "brokers" / system
    if system == "kafka":
        from .brokers.kafka import KafkaCluster

        if brokers not in (1, 3):
            raise BrokerError(f"--brokers {brokers}: a cluster has 1 or 3 nodes")
        cluster = KafkaCluster(version, brokers, {}, workdir, tie_to_parent=False)
        endpoint = cluster.start()
        state.save(system, cluster.state())
        out.print(
            f"kafka {endpoint.version} up: {endpoint.bootstrap_servers}  nodes {endpoint.pids}  "
            f"(ready in {endpoint.ready_after_s:.1f} s)"
        )
        return
    from pydantic import ValidationError

    from .brokers.nats import NatsServer
    from .systems import NatsBroker

    try:
        settings = {"mode": mode, "storage": storage, "sync_interval": sync_interval, "servers": servers}
        broker = NatsBroker.model_validate(settings)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'broker'}: {e['msg']}" for e in exc.errors())
        raise BrokerError(f"nats broker settings: {problems}") from None
    if broker.servers > 1:
        from .brokers.nats_cluster import NatsCluster

        cluster = NatsCluster(version, broker, workdir, tie_to_parent=False)
        cluster_endpoint = cluster.start()
        state.save(system, cluster.state())
        out.print(
            f"nats {cluster_endpoint.version} ({mode}) cluster {cluster_endpoint.cluster_name} up: "
            f"nodes {cluster_endpoint.pids}  (ready in {cluster_endpoint.ready_after_s:.1f} s)"
        )
        out.print(f"  url {cluster_endpoint.url}")  # its own line: three URLs would wrap the summary
        return
    server = NatsServer(version, broker, workdir, tie_to_parent=False)
    nats_endpoint = server.start()
    state.save(system, server.state())
    out.print(
        f"nats {nats_endpoint.version} ({mode}) up: {nats_endpoint.url}  monitor {nats_endpoint.monitor_url}  "
        f"pid {nats_endpoint.pid}"
    )


@brokers_app.command("down")
def brokers_down(system: Annotated[str, typer.Argument(help="nats or kafka")]) -> None:
    """Stop brokers started with `brokers up` (SIGTERM, then SIGKILL after a timeout)."""
    from .brokers import state
    from .brokers.process import stop_pid

    _known_system(system)
    current = state.load(system)
    if current is None:
        out.print(f"{system}: nothing to stop")
        return
    if system == "kafka":
        from .brokers.kafka import stop_detached

        stopped = stop_detached(current)
    elif "nodes" in current:  # a NATS cluster
        from .brokers.nats_cluster import stop_detached as stop_nats_cluster

        stopped = stop_nats_cluster(current)
    else:
        stopped = [current["pid"]] if stop_pid(current["pid"], "nats-server") else []
    shutil.rmtree(current["workdir"], ignore_errors=True)
    state.forget(system)
    out.print(f"{system}: stopped pids {stopped}" if stopped else f"{system}: was not running")


@brokers_app.command("status")
def brokers_status(system: Annotated[str, typer.Argument(help="nats or kafka")] = "nats") -> None:
    """Show whether brokers started with `brokers up` are running (exit 3 when down)."""
    from .brokers import state

    _known_system(system)
    current = state.load(system)
    pids = _state_pids(current) if current else []
    alive = [pid for pid in pids if _alive(pid)]
    if not alive:
        out.print(f"{system}: down")
        raise typer.Exit(3)
    if system == "kafka":
        out.print(
            f"kafka: up  {current['bootstrap_servers']}  version {current['version']}  "
            f"nodes alive {len(alive)}/{len(pids)}"
        )
        return
    from .brokers.nats import NatsServer

    if "nodes" in current:  # a NATS cluster: what each live node says about the JetStream meta group
        live = [n for n in current["nodes"] if n["pid"] in alive]
        meta = NatsServer.jsz(live[0]["monitor_url"]).get("meta_cluster") or {}
        out.print(
            f"nats: up  cluster {current['cluster_name']}  version {current['version']}  "
            f"nodes alive {len(alive)}/{len(pids)}  meta leader {meta.get('leader') or 'none'}"
        )
        out.print(f"  url {current['url']}")
        return
    varz = NatsServer.varz(current["monitor_url"])
    out.print(
        f"nats: up  {current['url']}  pid {current['pid']}  version {varz.get('version')}  "
        f"connections {varz.get('connections')}  in_msgs {varz.get('in_msgs')}"
    )


@brokers_app.command("certs")
def brokers_certs(
    folder: Annotated[Path, typer.Argument(help="where ca.pem, server-cert.pem, server-key.pem, server.pem go")],
    host: Annotated[list[str], typer.Option("--host", help="a name (or IP) the server certificate covers")],
    days: Annotated[int, typer.Option(help="validity of a new CA and certificate, in days")] = 365,
    readable_keys: Annotated[
        bool, typer.Option("--readable-keys", help="private keys readable by every user (brokers of another uid)")
    ] = False,
) -> None:
    """Make a CA and a server certificate for brokers in FOLDER, or keep the ones a previous run made there.

    What the docker-compose deployment's `broker-certs` service runs at every start: Kafka (PEM keystore) and
    nats-server read the files from the shared volume, clients trust ca.pem. Existing material that misses a
    host or expires within a week is an error naming the fix, never silently replaced under running brokers."""
    import datetime as dt

    from .brokers.tls import TlsError, ensure_tls

    if days < 8:
        raise typer.BadParameter(f"--days {days}: at least 8 (material is renewed a week before it expires)")
    try:
        made = ensure_tls(folder, tuple(host), dt.timedelta(days=days), 0o644 if readable_keys else 0o600)
    except TlsError as exc:
        raise TlsError(
            f"{exc}. Stop the brokers, remove the folder's files (docker compose: the broker-certs volume) and "
            "start again; clients and brokers then share the new CA"
        ) from None
    out.print(f"{'made' if made else 'kept'} TLS material in {folder} for {', '.join(host)}")


@brokers_app.command("fetch")
def brokers_fetch(
    system: Annotated[str, typer.Argument(help="nats or kafka")],
    version: Annotated[Optional[str], typer.Argument(help="release to fetch into the cache")] = None,  # noqa: UP045
    list_versions: Annotated[bool, typer.Option("--list", help="list the releases available")] = False,
) -> None:
    """Fetch a broker release into the cache (verified before use), or list the releases."""
    from .systems import SYSTEM_VERSIONS, resolve_version

    _known_system(system)
    if list_versions or version is None:
        if system == "kafka":
            from .brokers.kafka import available_versions

            supported = set(SYSTEM_VERSIONS["kafka"])
            for v in available_versions():
                out.print(f"{v}{'  (supported)' if v in supported else ''}")
        else:
            for v in SYSTEM_VERSIONS[system]:
                out.print(v)
        return
    version = resolve_version(system, version)
    if system == "kafka":
        from .brokers.kafka import kafka_classpath

        out.print(str(kafka_classpath(version)))
        return
    if version not in SYSTEM_VERSIONS[system]:
        raise BrokerError(f"unknown {system} version {version!r}; see 'sixnines brokers fetch {system} --list'")
    from .brokers.nats import server_binary

    out.print(str(server_binary(version)))


@cell_app.command("drive")
def cell_drive(work: Annotated[Path, typer.Argument(help="the cell's work folder, written by provision")]) -> None:
    """Drive a provisioned cell's whole schedule, writing status.json every second and cellrun.json at the end
    (Airflow's warmup task starts this detached; exit 1 if the cell failed)."""
    from .cell_process import generator_main

    code = generator_main(work)
    if code:
        raise typer.Exit(code)


@cell_app.command("host")
def cell_host(
    folder: Annotated[str, typer.Argument(help="the cell's hosts folder in the lake (path or s3:// URI)")],
    host: Annotated[str, typer.Argument(help="the load-generator host this process stands for")],
    staging: Annotated[Path, typer.Argument(help="a local folder for this host's samples")],
) -> None:
    """Drive one host's share of a cell whose load runs on real hosts (`sixnines run` starts one per host; in
    Airflow each host's generate task does the same on its queue). Exit 1 if the cell failed on this host."""
    import signal

    from .errors import CellError
    from .hostparts import run_host_part
    from .storage import lake_path

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
    """Remove network namespaces a hard-killed run left behind (every `sixnines-<token>-*` namespace of a run
    token in which no process runs). Cells remove their own; run this only while no cell is starting."""
    from . import netns

    stale = netns.stale_tokens()
    names = sorted(n for group in stale.values() for n in group)
    if dry_run:
        out.print("\n".join(names) if names else "no stale namespaces")
        return
    removed = netns.clean_stale()
    out.print(f"removed {len(removed)} namespace(s)" + (": " + ", ".join(sorted(removed)) if removed else ""))


def _known_system(system: str) -> None:
    if system not in SYSTEMS:
        raise BrokerError(f"unknown system {system!r}; this harness provisions: {', '.join(SYSTEMS)}")


def _state_pids(current: dict) -> list[int]:
    """PIDs recorded by `brokers up`: one nats-server, or every node of a Kafka or NATS cluster."""
    return [int(n["pid"]) for n in current["nodes"]] if "nodes" in current else [int(current["pid"])]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@app.command()
def regressions(
    lake: LakeOption = "lake",
    magnitude: Annotated[float, typer.Option("--magnitude", help="alert above this relative rise (0.1 = 10 %)")] = 0.10,
    p_value: Annotated[float, typer.Option("--p-value", help="max p-value of a change point (Otava t-test)")] = 0.001,
    window: Annotated[int, typer.Option("--window", help="Otava sliding window, in runs")] = 50,
    run_id: Annotated[Optional[str], typer.Option("--run-id", help="run to check (default: newest)")] = None,  # noqa: UP045
    write: Annotated[bool, typer.Option("--write/--no-write", help="store results under LAKE/regressions/")] = True,
    as_json: JsonOption = False,
) -> None:
    """Check the published history for latency regressions (change points by Apache Otava; a baseline of
    recent runs for short histories). Exit codes: 0 no alert, 4 at least one alert, 2 bad input."""
    from rich.table import Table

    from .regressions import Settings, detect, write_results

    result = detect(lake, Settings(magnitude=magnitude, max_pvalue=p_value, window_len=window), run_id)
    written = write_results(lake, result) if write else None
    if as_json:
        print(json.dumps({**result.to_dict(), "written": None if written is None else str(written)}, indent=2))
    else:
        alerted = [a.change for a in result.alerts]
        table = Table(title=f"change points up to run {result.run_id} ({result.run_date})")
        for column in (
            "",
            "cell",
            "series",
            "p",
            "view",
            "before → after ms",
            "change",
            "p-value",
            "from run",
            "versions",
        ):
            table.add_column(column)
        for c in result.change_points:
            table.add_row(
                "[red]ALERT[/]" if c in alerted else ("worse" if c.worse else "better"),
                escape(f"{c.label} {c.series_key}"),
                f"{c.metric}/{c.basis}",
                c.percentile,
                f"{c.view}/{c.method}",
                f"{c.before_ms:.3f} → {c.after_ms:.3f}",
                f"{c.relative_change:+.1%}",
                "-" if c.p_value is None else f"{c.p_value:.2g}",
                f"{c.run_id} ({c.run_date})",
                escape(
                    ",".join(c.versions_after)
                    if c.versions_before == c.versions_after
                    else f"{','.join(c.versions_before)} → {','.join(c.versions_after)}"
                ),
            )
        out.print(table if result.change_points else f"no change points up to run {result.run_id}")
        out.print(f"{result.series_checked} series checked, skipped {result.skipped or 'none'}; results: {written}")
        for alert in result.alerts:
            out.print(f"[red]regression:[/] {escape(alert.summary())}")
    if result.alerts:
        raise typer.Exit(4)


@app.command()
def report(
    run_id: Annotated[
        Optional[str],  # noqa: UP045 (typer needs Optional here)
        typer.Argument(help="run to report (its id in the lake)"),
    ] = None,
    lake: LakeOption = "lake",
    out_file: Annotated[Optional[Path], typer.Option("--out", help="write the HTML here")] = None,  # noqa: UP045
    compare: Annotated[
        Optional[tuple[str, str]],  # noqa: UP045
        typer.Option("--compare", help="two run ids A B: pair their cells by series key, B/A"),
    ] = None,
) -> None:
    """Write RUN_ID's self-contained HTML report (lake/reports/run_date=D/run_id=R/report.html), or with
    --compare A B one comparison report; both open offline."""
    from .report import ReportError, build_compare_report, build_run_report

    if compare and run_id:
        raise ReportError("give either RUN_ID or --compare RUN_A RUN_B, not both")
    if compare:
        path = build_compare_report(lake, compare[0], compare[1], out_file)
    elif run_id:
        path = build_run_report(lake, run_id, out_file)
    else:
        raise ReportError("give a RUN_ID, or --compare RUN_A RUN_B")
    out.print(f"report: {path}  ({path.stat().st_size / 1024:.0f} KiB)")  # an S3 object: its uri


@app.command()
def analyze(
    run_id: Annotated[str, typer.Argument(help="run id, as printed by `sixnines run`")],
    lake: LakeOption = "lake",
    master: Annotated[Optional[str], typer.Option(help="Spark master (default local[*])")] = None,  # noqa: UP045
    measure_tolerance: Annotated[float, typer.Option(help="gate: measure-phase sends vs rate × seconds")] = 0.01,
    allowed_loss_ratio: Annotated[float, typer.Option(help="gate: loss allowed where not guaranteed")] = 0.0,
) -> None:
    """Spark percentile/timeline/histogram tables for a run, the Great Expectations gate, then publish
    (exit 1 and quarantine, naming the failed expectations, when the gate fails)."""
    from spark_jobs.pipeline import GateThresholds, run_analysis  # pyspark and GX load only for this command
    from spark_jobs.session import get_spark

    spark = get_spark("sixnines-analyze", master, lake=lake)
    try:
        folder = run_analysis(spark, lake, run_id, GateThresholds(measure_tolerance, allowed_loss_ratio))
    finally:
        spark.stop()
    out.print(f"published {run_id}: {folder}")


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
