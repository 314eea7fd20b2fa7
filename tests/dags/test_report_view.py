"""The run's report from the Airflow UI: the plugin loads through Airflow's own plugins manager (an external
view on every DAG run, a FastAPI app under /sixnines), and the app serves a run's report and its tables.

Routes are called over HTTP with FastAPI's test client; Airflow's auth check is replaced by a stand-in that
records the call, since no API server (and so no logged-in user) exists here. The plugin's real guard is
asserted to be Airflow's `requires_access_dag`."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from bench_tasks.lake.layout import RunInfo


def test_airflow_loads_the_plugin_with_its_view_and_app() -> None:
    from airflow import plugins_manager

    plugins, errors = plugins_manager._get_plugins()
    assert not errors, errors
    (plugin,) = [p for p in plugins if p.name == "sixnines_reports"]
    (view,) = plugin.external_views
    assert view["destination"] == "dag_run" and view["href"] == "sixnines/reports/{DAG_ID}/{RUN_ID}/"
    (app,) = plugin.fastapi_apps
    assert app["url_prefix"] == "/sixnines"
    (guard,) = app["app"].router.dependencies
    assert guard.dependency.__qualname__.startswith("requires_access_dag")


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, list[str], Path]:
    """A lake with one run's raw folder and report, and the app reading it."""
    from sixnines_airflow.report_links import lake_run_id
    from sixnines_airflow.report_view import report_app

    run = RunInfo(lake_run_id("sixnines_quick", "manual__2026-11-23T10:00:00+00:00"), "2026-11-23")
    (tmp_path / "raw" / f"run_date={run.run_date}" / f"run_id={run.run_id}").mkdir(parents=True)
    folder = tmp_path / "reports" / f"run_date={run.run_date}" / f"run_id={run.run_id}"
    (folder / "report-tables").mkdir(parents=True)
    (folder / "report.html").write_text('<html><a href="report-tables/percentiles.csv">percentiles</a></html>')
    (folder / "report-tables" / "percentiles.csv").write_text("cell_id,p50_ns\na,1000\n")
    monkeypatch.setenv("SIXNINES_LAKE", str(tmp_path))
    calls: list[str] = []
    client = TestClient(report_app(access=lambda: calls.append("checked")))
    return client, calls, tmp_path


def test_the_run_tab_shows_the_report_and_its_tables(served: tuple[TestClient, list[str], Path]) -> None:
    client, calls, _ = served
    base = "/reports/sixnines_quick/manual__2026-11-23T10:00:00+00:00"
    page = client.get(f"{base}/")
    assert page.status_code == 200 and "report-tables/percentiles.csv" in page.text
    table = client.get(f"{base}/report-tables/percentiles.csv")  # where the report's relative link leads
    assert table.status_code == 200 and table.text.startswith("cell_id,p50_ns")
    assert client.get(base, follow_redirects=False).headers["location"].endswith("+00:00/")
    assert len(calls) == 3  # every route went through the access check


def test_missing_report_or_file_is_a_404_naming_the_run(served: tuple[TestClient, list[str], Path]) -> None:
    client, _, _ = served
    missing = client.get("/reports/sixnines_quick/scheduled__2026-11-24/")
    assert missing.status_code == 404 and "sixnines_quick__scheduled__2026-11-24" in missing.json()["detail"]
    base = "/reports/sixnines_quick/manual__2026-11-23T10:00:00+00:00"
    assert client.get(f"{base}/report-tables/../../secrets.csv").status_code == 404
    assert client.get(f"{base}/other/percentiles.csv").status_code == 404
    assert client.get(f"{base}/report-tables/nothing.csv").status_code == 404
