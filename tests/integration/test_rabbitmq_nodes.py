"""Real RabbitMQ nodes (Debian's rabbitmq-server): one node answers over AMQP and reports its versions; a 3-node
cluster forms with a quorum queue on all three, follows its leader through a freeze, a kill and a restart; a
setting the node refuses fails the start with the node's own words; nothing is left running afterwards."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pika
import psutil
import pytest
from pika.adapters.blocking_connection import BlockingChannel

from bench_tasks.errors import BrokerError
from bench_tasks.systems.rabbitmq import release
from bench_tasks.systems.rabbitmq.nodes import RabbitCluster, amqp_urls, stop_detached
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]

T = TypeVar("T")


def channel(url: str) -> tuple[pika.BlockingConnection, BlockingChannel]:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    return connection, connection.channel()


def cell_processes(cluster: RabbitCluster) -> list[int]:
    """Every process the cell ran: nodes, their helpers, epmd."""
    assert cluster.epmd is not None
    helpers = [pid for pids in cluster.helpers.values() for pid in pids]
    return [*cluster.node_pids.values(), *helpers, cluster.epmd.pid]


def assert_nothing_left(pids: list[int], ports: list[int], folder: Path) -> None:
    """None of the cell's processes runs, and nothing of it listens on its ports. This module runs beside other
    tests (`alongside`): a port it freed may be taken at once by another test's broker, which is not a leftover.
    A leftover of the cell mentions its folder (`folder`) in its command line or environment, as every node and
    what a node starts does."""
    running = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert not running, f"still running: {running}"
    listening = {
        c.laddr.port
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port in ports and _of_the_cell(c.pid, str(folder))
    }
    assert not listening, f"still listening: {sorted(listening)}"


def _of_the_cell(pid: int | None, folder: str) -> bool:
    """Whether process `pid` mentions `folder` (an owner that cannot be read counts as the cell's)."""
    if pid is None:
        return True
    try:
        process = psutil.Process(pid)
        return folder in " ".join([*process.cmdline(), *process.environ().values()])
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def wait_for(what: str, check: Callable[[], T | None], timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def new_leader(cluster: RabbitCluster, queue: str, old: int) -> int | None:
    now = cluster.leader(queue)
    return now if now not in (None, old) else None


def assert_boots_the_server_apps_only(cluster: RabbitCluster, server_apps: list[str]) -> None:
    """The node loaded every application of its server home (`home.py`) and nothing else of the package's
    plugins folder: the home's boot closure is exactly what RabbitMQ boots, and no optional plugin is on its
    code path."""
    names = {folder.rsplit("-", 1)[0] for folder in server_apps}
    loaded = set(
        (
            cluster.ask(1, 'string:join([atom_to_list(A) || {A, _, _} <- application:loaded_applications()], " ")')
            or ""
        ).split()
    )
    packaged = {
        p.name.rsplit("-", 1)[0] for p in (release.LIB_DIR / f"rabbitmq_server-{cluster.version}" / "plugins").iterdir()
    }
    assert {"rabbit", "rabbit_common", "ra", "osiris"} <= names
    assert loaded & packaged == names
    plugins_on_path = cluster.ask(
        1, 'string:join([P || P <- code:get_path(), string:find(P, "/plugins/") =/= nomatch], " ")'
    )
    assert plugins_on_path is not None
    assert sorted(path.split("/plugins/")[1].split("/")[0] for path in plugins_on_path.split()) == sorted(server_apps)


def test_one_node_answers_and_reports_its_versions(tmp_path: Path) -> None:
    cluster = RabbitCluster("latest", RabbitmqBroker(), tmp_path)
    with cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        print(f"\n1 RabbitMQ node ready in {endpoint.ready_after_s:.3f} s (load {os.getloadavg()[0]:.2f})")
        assert endpoint.version == release.resolve_version("latest")
        assert endpoint.erlang.split(".")[0].isdigit()
        context = cluster.context()
        assert context["version"] == release.resolve_version("latest") and "cookie" not in str(context)
        assert context["nodes"][0]["config"].startswith(
            f"listeners.tcp.default = 127.0.0.1:{endpoint.nodes[0].amqp_port}"
        )
        assert_boots_the_server_apps_only(cluster, context["server_apps"])
        connection, ch = channel(cluster.user.url(amqp_urls(endpoint.url)[0]))
        ch.queue_declare("answers", durable=False)
        ch.basic_publish("", "answers", b"sixnines")
        assert wait_for("the message", lambda: ch.basic_get("answers", auto_ack=True)[2]) == b"sixnines"
        assert cluster.leader("answers") == 1
        assert cluster.leader("no-such-queue") is None
        connection.close()
        pids = cell_processes(cluster)
        ports = [endpoint.epmd_port, endpoint.nodes[0].amqp_port, endpoint.nodes[0].dist_port]
    assert_nothing_left(pids, ports, tmp_path)
    written = [p for p in Path(endpoint.workdir).rglob("*") if not p.is_symlink()]
    outside = [p for p in written if not p.resolve().is_relative_to(tmp_path.resolve())]
    assert not outside
    links = [p for p in Path(endpoint.workdir).rglob("*") if p.is_symlink()]  # the server home's, into the package
    assert links and all(p.is_relative_to(cluster.server_home) for p in links)
    assert all(p.resolve().is_relative_to(release.LIB_DIR.resolve()) for p in links)


def test_three_nodes_replicate_a_quorum_queue_and_follow_its_leader(tmp_path: Path) -> None:
    cluster = RabbitCluster("latest", RabbitmqBroker(nodes=3, queue_type="quorum"), tmp_path)
    with cluster:
        endpoint = cluster.endpoint
        assert endpoint is not None
        print(f"\n3 RabbitMQ nodes ready in {endpoint.ready_after_s:.3f} s (load {os.getloadavg()[0]:.2f})")
        assert [n.name for n in endpoint.nodes] == ["n1@127.0.0.1", "n2@127.0.0.1", "n3@127.0.0.1"]
        connection, ch = channel(cluster.user.url(amqp_urls(endpoint.url)[0]))
        ch.queue_declare("q3", durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_declare("s3", durable=True, arguments={"x-queue-type": "stream"})
        connection.close()
        assert cluster.members("q3") == [1, 2, 3]
        assert cluster.members("s3") == [1, 2, 3] and cluster.leader("s3") in (1, 2, 3)
        leader = cluster.leader("q3")
        assert leader in (1, 2, 3)

        cluster.pause(leader)
        asked = time.monotonic()
        assert cluster.alive()[leader] and cluster.leader("q3") in (1, 2, 3)
        assert time.monotonic() - asked < 3, "the frozen node was asked and waited for"
        cluster.resume(leader)

        cluster.kill(leader)
        assert not cluster.alive()[leader]
        began = time.monotonic()
        moved = wait_for("a new leader", lambda: new_leader(cluster, "q3", leader))
        print(f"leader n{leader} killed, n{moved} leads after {time.monotonic() - began:.2f} s")

        began = time.monotonic()
        cluster.restart(leader)
        print(f"n{leader} restarted and rejoined in {time.monotonic() - began:.2f} s")
        assert all(cluster.alive().values())
        assert cluster.members("q3") == [1, 2, 3]
        survivor = next(i for i in (1, 2, 3) if i != leader)
        connection, ch = channel(cluster.user.url(amqp_urls(endpoint.url)[survivor - 1]))
        assert ch.queue_declare("q3", passive=True).method.message_count == 0
        connection.close()
        pids = cell_processes(cluster)
        ports = [endpoint.epmd_port, *(n.amqp_port for n in endpoint.nodes), *(n.dist_port for n in endpoint.nodes)]
    assert_nothing_left(pids, ports, tmp_path)


def test_a_setting_the_node_refuses_fails_the_start_naming_it(tmp_path: Path) -> None:
    cluster = RabbitCluster("latest", RabbitmqBroker(server={"no_such_setting": 1}), tmp_path)
    with pytest.raises(BrokerError, match="no_such_setting") as caught:
        cluster.start(timeout_s=60)
    assert "RabbitMQ node 1 exited" in str(caught.value)
    assert cluster.epmd is not None and not cluster.epmd.alive()


def test_a_version_other_than_the_installed_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match=r"rabbitmq-server 3\.10\.8 .* is installed, the cell asks for 3\.9\.0"):
        RabbitCluster("3.9.0", RabbitmqBroker(), tmp_path).start()


def test_a_detached_node_is_stopped_from_its_state(tmp_path: Path) -> None:
    """Airflow's way: the node outlives the task that started it and is stopped later from the JSON state."""
    cluster = RabbitCluster("latest", RabbitmqBroker(), tmp_path, tie_to_parent=False)
    endpoint = cluster.start()
    state = json.loads(json.dumps(cluster.state()))
    assert "cookie" not in json.dumps(state) and state["home"] == str(tmp_path / "erlang")
    pids = cell_processes(cluster)
    try:
        # What assert_nothing_left looks for. Another worker's process may listen on the same port number at
        # another address: one listener of the port must be the cell's.
        port = endpoint.nodes[0].amqp_port
        owners = [
            c.pid for c in psutil.net_connections("tcp") if c.status == psutil.CONN_LISTEN and c.laddr.port == port
        ]
        assert any(_of_the_cell(pid, str(tmp_path)) for pid in owners), owners
        assert stop_detached(state) == [endpoint.nodes[0].pid]
    finally:
        cluster.stop()  # reaps what stop_detached ended (its Popen objects are this process's children)
    assert_nothing_left(pids, [endpoint.epmd_port, endpoint.nodes[0].amqp_port, endpoint.nodes[0].dist_port], tmp_path)
