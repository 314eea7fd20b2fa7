"""`sixnines_compare_versions`: one matrix, one system, several versions, one at a time, then a comparison.

Each version is a mapped task instance (at most one active, in the one-slot benchmark pool) that runs the
matrix's cells of that system in-process through `run_cell`, the same lifecycle steps the sweep DAGs run
as separate tasks. All versions land in one lake run (the DAG run), whose rows the comparison pairs by
series key (the cell spec without its version); each row keeps its own run date and version, so history
reads both by date and by version order.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, dag, get_current_context, task

from bench_tasks import SYSTEMS, SixninesError, load_matrix

from .cell_tasks import MAX_PHASE_SCALE, cell_timeout
from .runtime import POOL, lake_root, run_info
from .sweep import DEFAULT_ARGS, START_DATE

log = logging.getLogger("sixnines")
COMPARE_DAG_ID = "sixnines_compare_versions"
DEFAULT_SYSTEM = next(iter(SYSTEMS))  # the first registered system, until the run's conf names another


def build_compare_dag(matrices: Path) -> DAG:
    names = sorted(p.stem for p in matrices.glob("*.yaml"))

    @dag(
        dag_id=COMPARE_DAG_ID,
        schedule=None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        auto_register=False,
        tags=["sixnines", "compare"],
        default_args=DEFAULT_ARGS,
        doc_md=__doc__,
        params={
            "system": Param(DEFAULT_SYSTEM, enum=sorted(SYSTEMS), description="The system whose versions differ."),
            "versions": Param(
                list(SYSTEMS[DEFAULT_SYSTEM].versions[:2]),
                type="array",
                items={"type": "string"},
                minItems=2,
                uniqueItems=True,
                description="Versions in the order to compare (the change column is last vs first).",
            ),
            "matrix": Param("quick" if "quick" in names else names[0], enum=names, description="Matrix file stem."),
            "phase_scale": Param(1.0, type="number", exclusiveMinimum=0, maximum=MAX_PHASE_SCALE),
        },
    )
    def compare_versions() -> None:
        folder = str(matrices)
        longest = version_run_timeout(matrices)
        ran = run_version.override(execution_timeout=longest).partial(matrices=folder).expand(version=plan(folder))
        compare(ran)

    return compare_versions()


def version_run_timeout(matrices: Path) -> timedelta:
    """A version's task runs the cells of one matrix, chosen when the run starts: time for every cell of the
    longest matrix file, each its cell's timeout (`cell_timeout`). A file that does not load is left out (the
    sweep DAGs' file reports it; `plan` refuses it)."""
    longest = timedelta(0)
    for path in sorted(matrices.glob("*.yaml")):
        try:
            cells = load_matrix(path).cells
        except SixninesError:
            continue
        longest = max(longest, sum((cell_timeout(c) for c in cells), timedelta(0)))
    return longest or timedelta(hours=1)


@task(retries=0)
def plan(matrices: str) -> list[str]:
    """Check the versions against what the harness knows before any broker starts."""
    from bench_tasks import MatrixError

    params = get_current_context()["params"]
    known = SYSTEMS[params["system"]].versions
    unknown = [v for v in params["versions"] if v != "latest" and v not in known]
    if unknown:
        raise MatrixError(
            "params.versions", [f"{v!r}: unknown {params['system']} version; known: {known}" for v in unknown]
        )
    matrix = load_matrix(Path(matrices) / f"{params['matrix']}.yaml")
    if not any(c.spec.system == params["system"] and c.spec.brokers == "provisioned" for c in matrix.cells):
        raise MatrixError(str(matrix.source), [f"no provisioned {params['system']} cell to compare"])
    return list(params["versions"])


@task(pool=POOL, retries=0, max_active_tis_per_dag=1)
def run_version(matrices: str, version: str) -> list[dict[str, Any]]:
    """Run the matrix's cells of the system at `version`, one at a time (in-process `run_cell`)."""
    from rich.console import Console

    from bench_tasks import Lake, landed_summary, prepare_cell, run_cell

    context = get_current_context()
    params, run = context["params"], run_info(context)
    matrix = load_matrix(Path(matrices) / f"{params['matrix']}.yaml")
    console = Console(width=120, force_terminal=False, no_color=True)
    reports = []
    for base in matrix.cells:
        if base.spec.system != params["system"] or base.spec.brokers == "external":  # their version is not ours
            continue
        cell = prepare_cell(base, {params["system"]: version}, params["phase_scale"])
        report = run_cell(cell, Lake(lake_root()), run, console)
        log.info("%s %s: %s %s", cell.id, cell.label, report.status, report.reason or "")
        reports.append(landed_summary(report, run))
    return reports


@task(retries=1, trigger_rule="all_done")
def compare(ran: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Compare the landed rows of this run across versions; write the comparison beside the run's tables."""
    from bench_tasks import (
        COMPARISON_SCHEMA_VERSION,
        Lake,
        compare_versions,
        format_comparison,
        read_parquet,
        write_json,
    )

    context = get_current_context()
    params, run = context["params"], run_info(context)
    versions = [v if v != "latest" else SYSTEMS[params["system"]].versions[0] for v in params["versions"]]
    lake = Lake(lake_root())
    path = lake.cells_path(run)
    rows = read_parquet(path).to_pylist() if path.exists() else []
    entries = compare_versions(rows, versions)
    log.info("versions compared (ms):\n%s", format_comparison(entries, versions))
    out = lake.root / "tables" / "comparisons" / f"run_date={run.run_date}" / f"run_id={run.run_id}" / "versions.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(
        out,
        {
            "schema_version": COMPARISON_SCHEMA_VERSION,
            "system": params["system"],
            "versions": versions,
            "matrix": params["matrix"],
            "run_id": run.run_id,
            "entries": entries,
        },
    )
    failed = [r["cell_id"] for rs in ran or [] for r in rs if r["status"] != "ok"]
    if failed or not entries:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"comparison written to {out}, but failed cells: {failed or 'no cells landed'}")
    return {"path": str(out), "series": len({e["series_key"] for e in entries})}
