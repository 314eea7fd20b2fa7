"""Where a DAG run's report is, for Airflow: the lake's id of the run and the UI's link to it. Light (no FastAPI):
the plugin module and every task import it; the app itself is report_view.py, built only in the API server."""

from __future__ import annotations

import re

URL_PREFIX = "/sixnines"
# `href` is relative (no leading slash) so it works behind a proxy; the UI fills in the run's ids. The trailing
# slash makes the report's relative links (report-tables/…) resolve under the run's own route.
EXTERNAL_VIEW = {
    "name": "sixnines report",
    "href": "sixnines/reports/{DAG_ID}/{RUN_ID}/",
    "destination": "dag_run",
    "url_route": "sixnines-report",
    "category": "sixnines",
}


def lake_run_id(dag_id: str, dag_run_id: str) -> str:
    """The lake's id of a DAG run's sweep: `<dag_id>__<dag run id>` with unsafe path characters replaced."""
    return f"{dag_id}__{re.sub(r'[^A-Za-z0-9_.-]', '_', dag_run_id)}"
