"""`sixnines runs`, `analyze`, `report` and `regressions`: what a lake holds and what is made of it.

Every command here addresses a run the same way: a RUN_ID as `sixnines runs` lists it, or `--latest`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..lake.retention import refuse_if_pruned
from ..lake.runs import find_run_date, list_runs, resolve_run_id
from .app import JsonOption, LakeOption, LatestOption, RunIdArgument, app, err, out

if TYPE_CHECKING:  # the regression model imports Otava; only `regressions` pays for it
    from ..lake.storage import LakePath
    from ..regressions.model import RegressionResult

MasterOption = Annotated[Optional[str], typer.Option(help="Spark master (default local[*])")]  # noqa: UP045


@app.command()
def runs(lake: LakeOption = "lake", as_json: JsonOption = False) -> None:
    """List the runs in the lake, newest first: id, date, matrix, cells ok/failed, the report's path, and when
    its raw samples were pruned (sixnines lake prune)."""
    found = list_runs(lake)
    if as_json:
        rows = [{**vars(r), "report": None if r.report is None else str(r.report)} for r in found]
        print(json.dumps(rows, indent=2))
        return
    if not found:
        out.print(f"no runs in the lake {lake} yet (sixnines run MATRIX)")
        return
    width = max(len(r.run_id) for r in found)
    out.print(f"{'run id':<{width}}  {'date':<10}  {'matrix':<16} {'ok':>4} {'failed':>6}  report")
    for r in found:
        report = str(r.report) if r.report else "- (sixnines report RUN_ID)"
        report += f"  (raw samples pruned {r.raw_pruned})" if r.raw_pruned else ""
        failed = str(r.failed) if r.failed else ""
        out.print(
            f"{r.run_id:<{width}}  {r.run_date:<10}  {r.matrix:<16} {r.ok:>4} {failed:>6}  {report}", soft_wrap=True
        )


@app.command()
def analyze(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    master: MasterOption = None,
    measure_tolerance: Annotated[float, typer.Option(help="gate: measure-phase sends vs rate × seconds")] = 0.01,
    allowed_loss_ratio: Annotated[float, typer.Option(help="gate: loss allowed where not guaranteed")] = 0.0,
) -> None:
    """Build a run's Spark tables, gate them (Great Expectations) and publish them.

    Percentile, timeline, histogram and faults tables; when the gate fails they go to quarantine and the command
    exits 1 naming the failed expectations."""
    run_id = resolve_run_id(lake, run_id, latest)
    refuse_if_pruned(lake, find_run_date(lake, run_id), run_id, "analysing it again")  # before Spark starts
    folder = _analyze(lake, run_id, master, measure_tolerance, allowed_loss_ratio)
    out.print(f"published {run_id}: {folder}", soft_wrap=True)


@app.command()
def report(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    out_file: Annotated[Optional[Path], typer.Option("--out", help="write the HTML here")] = None,  # noqa: UP045
    compare: Annotated[
        Optional[tuple[str, str]],  # noqa: UP045
        typer.Option("--compare", help="two run ids A B: pair their cells by series key, B/A"),
    ] = None,
) -> None:
    """Write a run's self-contained HTML report, or with --compare A B one comparison report.

    Written to lake/reports/run_date=D/run_id=R/report.html (or --out); both open offline."""
    from ..report import ReportError, build_compare_report, build_run_report

    if compare:
        if run_id or latest:
            raise ReportError("give either RUN_ID/--latest or --compare RUN_A RUN_B, not both")
        path = build_compare_report(
            lake, resolve_run_id(lake, compare[0], False), resolve_run_id(lake, compare[1], False), out_file
        )
    else:
        path = build_run_report(lake, resolve_run_id(lake, run_id, latest), out_file)
    out.print(f"report: {path}  ({path.stat().st_size / 1024:.0f} KiB)", soft_wrap=True)  # an S3 object: its uri


@app.command()
def regressions(
    run_id: RunIdArgument = None,
    latest: LatestOption = False,
    lake: LakeOption = "lake",
    magnitude: Annotated[float, typer.Option("--magnitude", help="alert above this relative rise (0.1 = 10 %)")] = 0.10,
    p_value: Annotated[float, typer.Option("--p-value", help="max p-value of a change point (Otava t-test)")] = 0.001,
    window: Annotated[int, typer.Option("--window", help="Otava sliding window, in runs")] = 50,
    run_id_option: Annotated[
        Optional[str],  # noqa: UP045
        typer.Option("--run-id", hidden=True, help="the same as RUN_ID (older spelling)"),
    ] = None,
    write: Annotated[bool, typer.Option("--write/--no-write", help="store results under LAKE/regressions/")] = True,
    as_json: JsonOption = False,
) -> None:
    """Check the published history for latency regressions (exit 4 on an alert).

    Up to RUN_ID (default: the newest published run): change points by Apache Otava, a baseline of recent
    runs for short histories. Exit codes: 0 no alert, 4 at least one alert, 2 bad input."""
    from ..regressions import Settings, detect, write_results

    wanted = run_id or run_id_option
    wanted = resolve_run_id(lake, wanted, latest) if wanted or latest else None
    result = detect(lake, Settings(magnitude=magnitude, max_pvalue=p_value, window_len=window), wanted)
    written = write_results(lake, result) if write else None
    if as_json:
        print(json.dumps({**result.to_dict(), "written": None if written is None else str(written)}, indent=2))
    else:
        _print_regressions(result, written)
    if result.alerts:
        raise typer.Exit(4)


def _print_regressions(result: RegressionResult, written: LakePath | None) -> None:
    alerted = [a.change for a in result.alerts]
    table = Table(title=f"change points up to run {result.run_id} ({result.run_date})")
    for column in ("", "cell", "series", "view", "before → after", "change", "p-value", "from run", "versions"):
        table.add_column(column)
    for c in result.change_points:
        versions = (
            ",".join(c.versions_after)
            if c.versions_before == c.versions_after
            else f"{','.join(c.versions_before)} → {','.join(c.versions_after)}"
        )
        table.add_row(
            "[red]ALERT[/]" if c in alerted else ("worse" if c.worse else "better"),
            escape(f"{c.label} {c.series_key}"),
            escape(c.statistic),
            f"{c.view}/{c.method}",
            f"{c.shown(c.before)} → {c.shown(c.after)}",
            f"{c.relative_change:+.1%}",
            "-" if c.p_value is None else f"{c.p_value:.2g}",
            f"{c.run_id} ({c.run_date})",
            escape(versions),
        )
    out.print(table if result.change_points else f"no change points up to run {result.run_id}")
    out.print(f"{result.series_checked} series checked, skipped {result.skipped or 'none'}; results: {written}")
    for alert in result.alerts:
        out.print(f"[red]regression:[/] {escape(alert.summary())}")


def _analyze(lake: str, run_id: str, master: str | None, tolerance: float, loss: float) -> LakePath:
    from spark_jobs.pipeline import GateThresholds, run_analysis  # pyspark and GX load only for this command
    from spark_jobs.session import get_spark

    spark = get_spark("sixnines-analyze", master, lake=lake)
    try:
        return run_analysis(spark, lake, run_id, GateThresholds(tolerance, loss))
    finally:
        spark.stop()


def analyze_and_report(lake: str, run_id: str, console: Console) -> bool:
    """`run --report`: the tables and gate, then the report whatever the gate said (a quarantined run still
    gets a report that shows why). True when the tables were published."""
    from ..errors import SixninesError
    from ..report import build_run_report

    console.rule("analysis")
    published = True
    try:
        console.print(f"published {run_id}: {_analyze(lake, run_id, None, 0.01, 0.0)}", soft_wrap=True)
    except SixninesError as exc:
        err.print(f"[red]analysis:[/] {escape(str(exc))}")
        published = False
    path = build_run_report(lake, run_id)
    console.print(f"report: {path}", soft_wrap=True)
    return published
