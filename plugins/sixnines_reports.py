"""Airflow plugin: each DAG run's sixnines report as a tab of the run in the Airflow UI (see
sixnines_airflow/report_view.py). The only module the plugins manager imports from this folder."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin
from sixnines_airflow.report_view import EXTERNAL_VIEW, URL_PREFIX, report_app


class SixninesReportsPlugin(AirflowPlugin):
    name = "sixnines_reports"
    fastapi_apps = [{"app": report_app(), "url_prefix": URL_PREFIX, "name": "sixnines reports"}]  # noqa: RUF012
    external_views = [EXTERNAL_VIEW]  # noqa: RUF012
