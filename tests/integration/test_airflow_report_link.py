"""From the Airflow UI to a run's report, on a real Airflow API server: the plugin's external view is listed by
Airflow's own plugins endpoint (what the UI reads to draw the run's "sixnines report" tab), and the tab's URL
serves the report and the tables it links to — to a logged-in user only (Airflow's simple auth manager)."""

from __future__ import annotations

import http.client
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench_tasks.brokers.ports import free_port
from tests.airflow_celery import Service, _wait_until
from tests.airflow_project import BIN, airflow_project, migrate

pytestmark = pytest.mark.alongside

DAG_ID, DAG_RUN = "sixnines_quick", "manual__2026-11-23T10:00:00+00:00"
LAKE_RUN = "sixnines_quick__manual__2026-11-23T10_00_00_00_00"  # how runtime.run_info names that run
PORT_TRIES = 3


def _lake(root: Path) -> Path:
    lake = root / "lake"
    (lake / "raw" / "run_date=2026-11-23" / f"run_id={LAKE_RUN}").mkdir(parents=True)
    folder = lake / "reports" / "run_date=2026-11-23" / f"run_id={LAKE_RUN}"
    (folder / "report-tables").mkdir(parents=True)
    (folder / "report.html").write_text('<h1>sixnines report</h1><a href="report-tables/accounting.csv">csv</a>')
    (folder / "report-tables" / "accounting.csv").write_text("cell_id,sent\nabc,1000\n")
    return lake


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _up(base: str) -> bool:
    try:
        return _get(f"{base}/api/v2/monitor/health")[0] == 200
    except OSError:  # not listening yet
        return False
    except http.client.HTTPException:  # another program took the port first: the server will fail to bind
        return False


@contextmanager
def _api_server(env: dict[str, str], folder: Path) -> Iterator[str]:
    """An Airflow API server on a free port, its base URL; on another port if something else took the one chosen
    before the server bound it (a Spark test's py4j gateway did, beside this test)."""
    for attempt in range(PORT_TRIES):
        port = free_port()
        log = folder / f"api-server-{port}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(BIN / "airflow"), "api-server", "--host", "127.0.0.1", "--port", str(port), "-w", "1"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        api = Service("api-server", proc, log)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_until(lambda: _up(base), "airflow api-server", [api], 300)  # noqa: B023 (called at once)
        except RuntimeError:
            api.stop()
            if attempt + 1 < PORT_TRIES and "already in use" in log.read_text(errors="replace"):
                continue
            raise
        try:
            yield base
        finally:
            api.stop()
        return


def _token(base: str) -> str:
    body = json.dumps({"username": "admin", "password": "sixnines-test"}).encode()
    request = urllib.request.Request(f"{base}/auth/token", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())["access_token"]


def test_the_run_tab_serves_the_report(tmp_path: Path) -> None:
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"admin": "sixnines-test"}))
    env = airflow_project(
        tmp_path,
        {},
        dag_files=(),
        lake=str(_lake(tmp_path)),
        extra_env={
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        },
    )
    migrate(env)
    with _api_server(env, tmp_path) as base:
        token = _token(base)

        status, body = _get(f"{base}/api/v2/plugins", token)
        assert status == 200, body
        (plugin,) = [p for p in json.loads(body)["plugins"] if p["name"] == "sixnines_reports"]
        (view,) = plugin["external_views"]
        assert (view["destination"], view["href"]) == ("dag_run", "sixnines/reports/{DAG_ID}/{RUN_ID}/")

        tab = f"{base}/{view['href'].replace('{DAG_ID}', DAG_ID).replace('{RUN_ID}', DAG_RUN)}"
        assert _get(tab)[0] in (401, 403)  # not without a login
        status, page = _get(tab, token)
        assert status == 200 and "<h1>sixnines report</h1>" in page
        status, csv = _get(f"{tab}report-tables/accounting.csv", token)
        assert status == 200 and csv.startswith("cell_id,sent")
        status, missing = _get(f"{base}/sixnines/reports/{DAG_ID}/scheduled__2026-11-24/", token)
        assert status == 404 and "no report for run" in missing
