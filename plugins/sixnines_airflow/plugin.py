"""Airflow plugin: each DAG run's sixnines report as a tab of the run in the Airflow UI (see `report_view`).

Registered by the package's `airflow.plugins` entry point, so an Airflow that installs the sixnines wheel loads
it without a file in its plugins folder (this repository's own deployment included).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from .report_links import EXTERNAL_VIEW, URL_PREFIX


@cache
def _apps() -> list[dict[str, Any]]:
    from .report_view import report_app

    return [{"app": report_app(), "url_prefix": URL_PREFIX, "name": "sixnines reports"}]


class SixninesReportsPlugin(AirflowPlugin):
    name = "sixnines_reports"
    external_views = [EXTERNAL_VIEW]  # noqa: RUF012

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:
        """Built when first asked for — by the API server — so tasks, which load plugins too, do not pay for
        importing FastAPI and Airflow's auth."""
        return _apps()
