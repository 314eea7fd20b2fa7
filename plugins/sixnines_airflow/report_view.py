"""The run's report in the Airflow UI (the Airflow 3 way): a FastAPI app that Airflow's API server serves under
`/sixnines`, and an external view that puts a "sixnines report" tab on every DAG run, showing that run's report.

A browser will not follow a `file://` link out of an http page, and an S3 lake is not reachable from it at
all, so the API server reads the report (local or S3) and serves it, with the full tables it links to. Every
route requires read access to the DAG's runs (Airflow's own auth: the UI's session cookie or a bearer
token), like the rest of the UI. Registered by `plugin.py`.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from .report_links import lake_run_id

_TABLE_FILE = re.compile(r"^[a-z0-9_]+\.(csv|parquet)$")
_MEDIA = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}


def _access() -> Any:
    """Read access to the DAG's runs, checked by Airflow's auth manager (imported only in the API server)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag("GET", DagAccessEntity.RUN)


def report_app(access: Any = None) -> FastAPI:
    """The app; `access` is the dependency that guards every route (Airflow's, unless a test passes its own)."""
    guard = [Depends(access or _access())]
    app = FastAPI(title="sixnines reports", dependencies=guard)
    app.add_api_route("/reports/{dag_id}/{dag_run_id}", _to_folder, methods=["GET"])
    app.add_api_route("/reports/{dag_id}/{dag_run_id}/", _report, methods=["GET"], response_class=HTMLResponse)
    app.add_api_route("/reports/{dag_id}/{dag_run_id}/{folder}/{name}", _table, methods=["GET"])
    return app


def _to_folder(dag_id: str, dag_run_id: str) -> RedirectResponse:
    return RedirectResponse(f"{dag_run_id}/", status_code=307)


def _report(dag_id: str, dag_run_id: str) -> HTMLResponse:
    path = _report_path(lake_run_id(dag_id, dag_run_id))
    return HTMLResponse(path.read_text())


def _table(dag_id: str, dag_run_id: str, folder: str, name: str) -> Response:
    """One of the full tables the report links to (only `<table>.csv|parquet` in the report's tables folder)."""
    from bench_tasks import tables_folder_name

    report = _report_path(lake_run_id(dag_id, dag_run_id))
    match = _TABLE_FILE.match(name)
    target = report.parent / folder / name
    if folder != tables_folder_name(report) or match is None or not target.exists():
        raise HTTPException(404, f"no table file {folder}/{name} beside this run's report")
    return Response(target.read_bytes(), media_type=_MEDIA[match.group(1)])


def _report_path(run_id: str) -> Any:
    from bench_tasks import find_report

    from .runtime import lake_root

    path = find_report(lake_root(), run_id)
    if path is None:
        raise HTTPException(
            404,
            f"no report for run {run_id} in the lake {lake_root()} yet: the sweep's `report` task writes it "
            "when its cells and analysis are done",
        )
    return path
