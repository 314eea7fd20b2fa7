"""`sixnines lake prune`: remove raw samples older than the retention limit, dry run first.

The limit is the lake's setting: `--older-than-days`, or `SIXNINES_RAW_RETENTION_DAYS` beside `SIXNINES_LAKE`
(a property of where the lake lives and its disk, not of a matrix: one matrix's runs may land in several lakes).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Annotated

import typer

from ..lake.prune import PrunePlan, RunToPrune, plan_prune, prune
from .app import JsonOption, LakeOption, app, out

lake_app = typer.Typer(no_args_is_help=True, help="Keep the lake: raw-sample retention.")
app.add_typer(lake_app, name="lake")

RETENTION_ENV = "SIXNINES_RAW_RETENTION_DAYS"


@lake_app.command("prune")
def lake_prune(
    older_than_days: Annotated[
        float,
        typer.Option(
            "--older-than-days",
            envvar=RETENTION_ENV,
            min=0,
            help="remove raw samples of analysed runs whose newest cell finished more than this many days ago",
        ),
    ],
    lake: LakeOption = "lake",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="list what would go (runs, files, bytes); remove nothing")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Remove analysed runs' raw sample files (sent-p*, received-c*, relayed-r*) past the retention limit.

    Tables, cell.hlog histograms, result.json, cells rows, history and reports stay: a pruned run still
    reports, compares and alerts; re-analysis and OMB/.hgrm export refuse it. Runs not analysed yet or being
    written are skipped and listed. Each pruned run records when, how many files and bytes
    (runs/…/raw_pruned.json)."""
    plan = plan_prune(lake, older_than_days)
    if not as_json:
        _print_plan(plan, dry_run)
    markers = [] if dry_run else prune(lake, plan, None if as_json else _progress)
    if as_json:
        print(json.dumps(_plan_json(plan, dry_run, markers), indent=2))
    elif not dry_run:
        out.print(f"pruned {len(markers)} run(s): {plan.files} files, {_size(plan.bytes)}")


def _print_plan(plan: PrunePlan, dry_run: bool) -> None:
    verb = "would prune" if dry_run else "pruning"
    for run in plan.runs:
        again = " (finishing an interrupted prune)" if run.resumed else ""
        out.print(
            f"{verb} run {run.run_id} ({run.run_date}, finished {run.finished_at}, {_age(run, plan.now)}): "
            f"{run.cells} cells, {len(run.files)} files, {_size(run.bytes)}{again}",
            soft_wrap=True,
        )
    for skipped in plan.skipped:
        out.print(f"skipped run {skipped.run_id} ({skipped.run_date}): {skipped.reason}", soft_wrap=True)
    out.print(
        f"{len(plan.runs)} run(s) older than {plan.older_than_days:g} days: {plan.files} files, {_size(plan.bytes)}"
        f"{' (dry run: nothing removed)' if dry_run else ''}; {plan.kept} younger kept, {len(plan.skipped)} skipped"
    )


def _progress(run: RunToPrune, done: int) -> None:
    out.print(f"  {run.run_id}: {done}/{len(run.files)} files removed", soft_wrap=True)


def _age(run: RunToPrune, now: dt.datetime) -> str:
    return f"{run.age_days(now):.1f} days old"


def _size(n: int) -> str:
    return f"{n:,} bytes ({n / 2**20:.1f} MiB)"


def _plan_json(plan: PrunePlan, dry_run: bool, markers: list[dict]) -> dict:
    return {
        "dry_run": dry_run,
        "older_than_days": plan.older_than_days,
        "runs": [
            {
                "run_id": r.run_id,
                "run_date": r.run_date,
                "finished_at": r.finished_at,
                "cells": r.cells,
                "files": len(r.files),
                "bytes": r.bytes,
                "resumed": r.resumed,
            }
            for r in plan.runs
        ],
        "skipped": [vars(s) for s in plan.skipped],
        "kept": plan.kept,
        "files": plan.files,
        "bytes": plan.bytes,
        "pruned": markers,
    }
