"""External Redis: a server the cell does not own (started here, then reached only through an `AIRFLOW_CONN_…`
variable as an ACL user) serves a streams cell whose stream is made and deleted by the cell, with the server's
version recorded from INFO server and the password nowhere in the lake."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest
import redis
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.redis.nodes import RedisServers
from bench_tasks.systems.redis.settings import RedisBroker
from tests.integration.helpers import REDIS_RELEASES

pytestmark = pytest.mark.usefixtures("no_orphans")


def test_external_server_via_a_connection(tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    admin, password = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    broker = RedisBroker(server={"requirepass": admin})
    with RedisServers("latest", broker, tmp_path / "server") as servers:
        assert servers.endpoint is not None
        with redis.Redis(port=servers.ports[1], password=admin, protocol=2) as setup:  # an ACL user of its own
            setup.acl_setuser(
                "bench", enabled=True, passwords=[f"+{password}"], keys="*", channels="*", commands=["+@all"]
            )
        conn = {
            "conn_type": "redis",
            "host": "127.0.0.1",
            "port": servers.ports[1],
            "login": "bench",
            "password": password,
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_REDIS_EXTERNAL", json.dumps(conn))
        raw = {
            "name": "ext",
            "systems": [
                {
                    "system": "redis",
                    "brokers": "external",
                    "connection": "sixnines_redis_external",
                    "broker": {"mode": "streams"},
                }
            ],
            "workload": {
                "message_size_bytes": 256,
                "rate_per_s": 200,
                "warmup_s": 0.5,
                "measure_s": 1,
                "cooldown_s": 0.5,
            },
            "measurements": ["e2e"],
        }
        (cell,) = select_cells(parse_matrix(raw, "ext"))
        report = run_cell(cell, Lake(tmp_path / "lake"), RunInfo.new(), console)

        assert report.status == "ok", report.reason
        acc = report.analysis.accounting
        assert acc.sent == acc.acknowledged == acc.received == 200 and acc.lost == 0
        context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
        assert context["version"] == REDIS_RELEASES[0] and "INFO server" in context["version_source"]
        assert context["access"]["auth"] == "acl user/password" and context["access"]["user"] == "bench"
        control = redis.Redis(port=servers.ports[1], password=admin, protocol=2)
        assert control.dbsize() == 0  # the cell's stream was deleted at teardown
        control.close()
    lake = tmp_path / "lake"
    text = "".join(p.read_text(errors="replace") for p in lake.rglob("*") if p.suffix in (".json", ".log"))
    assert password not in text and admin not in text
