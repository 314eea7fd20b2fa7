"""External RabbitMQ: a node the cell does not own (started here, then reached only through an
`AIRFLOW_CONN_…` variable with its own user and vhost) serves a cell on pika and one on the Java client (the JVM
worker logs in with the same user), each making and deleting its own queue, with the server's version recorded
and the password nowhere in the lake; a queue the node will not delete is named at teardown, never listed as
deleted."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pika
import pytest
from rich.console import Console

from bench_tasks.cell.lifecycle import provision_when_free
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.work import CellWork
from bench_tasks.errors import RoutesNotDeleted
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.rabbitmq import release
from bench_tasks.systems.rabbitmq.nodes import RabbitCluster
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker

pytestmark = pytest.mark.usefixtures("no_orphans")


def _add_user(cluster: RabbitCluster, user: str, password: str, vhost: str) -> None:
    """A user with every permission on a new vhost, over erl_call (no management plugin, no rabbitmqctl)."""
    b = lambda text: f'<<"{text}">>'  # noqa: E731
    expr = (
        f"begin ok = rabbit_vhost:add({b(vhost)}, {b('sixnines')}), "
        f"ok = rabbit_auth_backend_internal:add_user({b(user)}, {b(password)}, {b('sixnines')}), "
        f"ok = rabbit_auth_backend_internal:set_permissions({b(user)}, {b(vhost)}, "
        f'{b(".*")}, {b(".*")}, {b(".*")}, {b("sixnines")}), "ok" end'
    )
    assert cluster.ask(1, expr, timeout_s=10) == "ok"


def test_external_node_through_a_connection(tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch) -> None:
    password = secrets.token_urlsafe(12)
    with RabbitCluster("latest", RabbitmqBroker(), tmp_path / "node") as cluster:
        assert cluster.endpoint is not None
        _add_user(cluster, "bench", password, "perf")
        conn = {
            "conn_type": "amqp",
            "host": "127.0.0.1",
            "port": cluster.endpoint.nodes[0].amqp_port,
            "login": "bench",
            "password": password,
            "schema": "perf",
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_RABBITMQ_EXTERNAL", json.dumps(conn))
        for library in ("pika", "java"):  # the JVM worker logs in with the connection's user too
            report = _external_cell(library, tmp_path / "lake", console)
            assert report.status == "ok", f"{library}: {report.reason}"
            acc = report.analysis.accounting
            assert acc.sent == acc.acknowledged == acc.received == 200 and acc.lost == 0
            broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
            assert broker["version"] == release.resolve_version("latest")
            assert "Connection.Start" in broker["version_source"]
            assert broker["access"]["vhost"] == "perf" and broker["access"]["auth"] == "user/password"
        leftover = cluster.ask(1, 'integer_to_list(length(rabbit_amqqueue:list(<<"perf">>)))')
        assert leftover == "0"  # the cell's queue was deleted at teardown
    lake = tmp_path / "lake"
    assert password not in "".join(
        p.read_text(errors="replace") for p in lake.rglob("*") if p.suffix in (".json", ".log")
    )


def _external_cell(library: str, lake: Path, console: Console) -> Any:
    raw = {
        "name": "ext",
        "systems": [
            {
                "system": "rabbitmq",
                "brokers": "external",
                "connection": "sixnines_rabbitmq_external",
                "client": {"library": library},
            }
        ],
        "workload": {"message_size_bytes": 256, "rate_per_s": 200, "warmup_s": 0.5, "measure_s": 1, "cooldown_s": 0.5},
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "ext"))
    return run_cell(cell, Lake(lake), RunInfo.new(), console)


def test_a_queue_the_node_will_not_delete_is_named_at_teardown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between provision and teardown another connection takes the cell's queue (deletes it, declares it again
    exclusive, and stays open), so the node refuses teardown's delete (405 RESOURCE_LOCKED). Teardown finishes all
    the same, records no queue as deleted and the refused one with the node's reason, then fails saying so."""
    with RabbitCluster("latest", RabbitmqBroker(), tmp_path / "node") as cluster:
        assert cluster.endpoint is not None
        node = cluster.endpoint.nodes[0]
        conn = {
            "conn_type": "amqp",
            "host": "127.0.0.1",
            "port": node.amqp_port,
            "login": cluster.user.username,
            "password": cluster.user.password,
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_RABBITMQ_LOCKED", json.dumps(conn))
        raw = {
            "name": "locked",
            "systems": [{"system": "rabbitmq", "brokers": "external", "connection": "sixnines_rabbitmq_locked"}],
            "workload": {"message_size_bytes": 256, "rate_per_s": 200, "measure_s": 1},
            "measurements": ["e2e"],
        }
        (cell,) = select_cells(parse_matrix(raw, "locked"))
        work = CellWork(tmp_path / "work")
        provision_when_free(cell, RunInfo.new(), tmp_path / "lake", work)
        state = work.read(work.state)
        assert state is not None
        (queue,) = state["brokers"]["context"]["routes"]
        holder = pika.BlockingConnection(pika.URLParameters(cluster.user.url(node.amqp_url)))
        try:
            channel = holder.channel()
            channel.queue_delete(queue)
            channel.queue_declare(queue, exclusive=True)
            with pytest.raises(RoutesNotDeleted, match="RESOURCE_LOCKED"):
                teardown_step(work)
        finally:
            holder.close()
        report = json.loads((work.root / "teardown.json").read_text())
        assert report["deleted_routes"] == []
        assert (
            list(report["routes_not_deleted"]) == [queue] and "RESOURCE_LOCKED" in report["routes_not_deleted"][queue]
        )
