"""RabbitMQ's settings, a node's files and environment, and reading answers: pure, no broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bench_tasks.cell.runner import select_cells
from bench_tasks.errors import BrokerError
from bench_tasks.spec.matrix import MatrixError, parse_matrix
from bench_tasks.systems import system, system_of
from bench_tasks.systems.rabbitmq import erl, release
from bench_tasks.systems.rabbitmq.nodefiles import (
    Credentials,
    NodePlan,
    erl_tuple,
    node_argv,
    node_env,
    node_settings,
    render_conf,
)
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker, RabbitmqClient, check_pair, flatten_conf


def refusal(model: type, **fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        model(**fields)
    return str(caught.value)


def test_queue_types_fill_their_own_durability_and_replicas() -> None:
    assert RabbitmqBroker().model_dump(include={"durable", "persistent", "replicas"}) == {
        "durable": False,
        "persistent": False,
        "replicas": 1,
    }
    quorum = RabbitmqBroker(queue_type="quorum", nodes=3)
    assert (quorum.durable, quorum.persistent, quorum.replicas) == (True, True, 3)
    assert RabbitmqBroker(queue_type="stream", nodes=3, replicas=1).replicas == 1
    assert RabbitmqBroker(durable=True, persistent=True).persistent


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"queue_type": "quorum", "durable": False}, "broker.durable: false is not possible with queue_type 'quorum'"),
        ({"queue_type": "stream", "persistent": False}, "broker.persistent: false is not possible with queue_type"),
        ({"persistent": True}, "broker.persistent: true has no effect on a transient classic queue"),
        ({"queue_type": "quorum", "replicas": 3}, "broker.replicas 3 exceeds broker.nodes 1"),
        ({"nodes": 3, "replicas": 3}, "broker.replicas 3 needs queue_type 'quorum' or 'stream'"),
        ({"queue": {"x-queue-type": "quorum"}}, "broker.queue['x-queue-type'] is set by broker.queue_type"),
        ({"queue": {"max-length": 5}}, "broker.queue['max-length']: queue arguments start with 'x-'"),
        ({"server": {"listeners": {"tcp": {"default": 5672}}}}, "broker.server['listeners.tcp.default']"),
        ({"nodes": 2}, "Input should be 1 or 3"),
        ({"queue_kind": "classic"}, "queue_kind"),
    ],
)
def test_broker_refusals_name_the_field(fields: dict[str, object], named: str) -> None:
    assert named in refusal(RabbitmqBroker, **fields)


def test_client_refuses_a_prefetch_nothing_obeys() -> None:
    assert "client.prefetch 10 has no effect with client.acks 'auto'" in refusal(RabbitmqClient, prefetch=10)
    assert RabbitmqClient(acks="manual", prefetch=10).prefetch == 10
    assert "less than or equal to 65535" in refusal(RabbitmqClient, acks="manual", prefetch=70000)


def test_stream_consumers_must_ack_manually_with_a_prefetch() -> None:
    stream = RabbitmqBroker(queue_type="stream")
    assert check_pair(stream, RabbitmqClient()) == [
        "client.acks must be 'manual' with broker.queue_type 'stream' (RabbitMQ refuses others)",
        "client.prefetch must be at least 1 with broker.queue_type 'stream' (RabbitMQ needs a qos)",
    ]
    assert check_pair(stream, RabbitmqClient(acks="manual", prefetch=100)) == []
    assert check_pair(RabbitmqBroker(), RabbitmqClient()) == []


def test_nested_server_settings_are_dotted_keys() -> None:
    assert flatten_conf({"log": {"console": {"level": "debug"}}, "vm_memory_high_watermark.relative": 0.6}) == {
        "log.console.level": "debug",
        "vm_memory_high_watermark.relative": 0.6,
    }


def plan(index: int = 2) -> NodePlan:
    return NodePlan(
        index=index,
        name=erl.node_name(index, "10.0.0.2"),
        host="10.0.0.2",
        amqp_port=40001,
        dist_port=40002,
        folder=Path("/cell/n2"),
        home=Path("/cell/erlang"),
        epmd_port=40000,
        server_home=Path("/cell/rabbitmq-home"),
    )


def test_a_joining_node_seeds_from_node_one_and_the_matrix_comes_last() -> None:
    broker = RabbitmqBroker(server={"collect_statistics_interval": 60000, "heartbeat": False})
    user = Credentials("sixnines", "pw")
    text = render_conf(node_settings(plan(), "n1@10.0.0.2", broker, user))
    assert text.splitlines() == [
        "listeners.tcp.default = 10.0.0.2:40001",
        "default_user = sixnines",
        "default_pass = pw",
        "loopback_users = none",
        "cluster_formation.peer_discovery_backend = classic_config",
        "cluster_formation.classic_config.nodes.1 = n1@10.0.0.2",
        "cluster_formation.discovery_retry_interval = 250",
        "cluster_formation.discovery_retry_limit = 480",
        "collect_statistics_interval = 60000",
        "heartbeat = false",
    ]
    assert "cluster_formation" not in render_conf(node_settings(plan(1), None, broker, user))


def test_the_node_environment_points_everything_into_its_folder() -> None:
    env = node_env(plan(), RabbitmqBroker(erl_args="+sbwt none"))
    assert env["RABBITMQ_NODENAME"] == "n2@10.0.0.2"
    assert env["ERL_EPMD_PORT"] == "40000"
    assert env["RABBITMQ_DIST_PORT"] == "40002"
    assert env["HOME"] == "/cell/erlang"
    assert env["RABBITMQ_SCRIPTS_DIR"] == "/cell/rabbitmq-home/sbin"
    assert env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] == (
        "+B i -start_epmd false -kernel inet_dist_use_interface {10,0,0,2} +sbwt none"
    )
    paths = [v for k, v in env.items() if k.startswith("RABBITMQ_") and v.startswith("/")]
    assert paths and all(p.startswith("/cell/") for p in paths), paths
    argv = node_argv(Path("/usr/lib/rabbitmq/bin/rabbitmq-server"), env)
    assert argv[:2] == ["env", "-i"] and argv[-2:] == ["/usr/lib/rabbitmq/bin/rabbitmq-server", "-noinput"]


def test_node_names_and_erlang_literals() -> None:
    assert erl.node_index("n3@127.0.0.1") == 3
    assert erl.node_index("'n2@127.0.0.1'") == 2
    assert erl.node_index("rabbit@host") is None
    assert erl.node_index("") is None
    assert erl.binary('a"b\\c') == '<<"a\\"b\\\\c">>'


def test_debian_versions_reduce_to_upstream() -> None:
    assert release.upstream_version("3.10.8-1.1+deb12u1") == "3.10.8"
    assert release.upstream_version("1:25.2.3+dfsg-1+deb12u4") == "25.2.3"
    assert release.resolve_version("latest") == release.upstream_version(release.package_version() or "")
    assert release.resolve_version("3.10.8") == "3.10.8"


def test_nodes_need_an_ipv4_address() -> None:
    assert erl_tuple("10.0.0.2") == "{10,0,0,2}"
    with pytest.raises(BrokerError, match="IPv4 host address, not 'localhost'"):
        erl_tuple("localhost")


def rabbit_matrix(measurement: str, broker: dict | None = None, client: dict | None = None, **more: object) -> dict:
    return {
        "name": "t",
        "systems": [{"system": "rabbitmq", "versions": ["latest"], "broker": broker or {}, "client": client or {}}],
        "workload": {"message_size_bytes": 256, "rate_per_s": 100, "measure_s": 2, **more},
        "measurements": [measurement],
    }


@pytest.mark.parametrize(
    ("measurement", "broker", "client", "named"),
    [
        ("publish", {}, {"confirms": False}, "measurement 'publish' needs client.confirms: true"),
        ("rtt", {"queue_type": "stream"}, {"acks": "manual", "prefetch": 10}, "measurement 'rtt' needs a classic"),
        ("e2e", {"queue_type": "stream"}, {}, "client.acks must be 'manual' with broker.queue_type 'stream'"),
        ("e2e", {"queue_type": "quorum", "durable": False}, {}, "broker.durable: false is not possible"),
        ("e2e", {"server": {"listeners.tcp.default": 5672}}, {}, "broker.server['listeners.tcp.default']"),
        ("e2e", {"nodes": 2}, {}, "nodes"),
    ],
)
def test_a_bad_cell_names_its_field(measurement: str, broker: dict, client: dict, named: str) -> None:
    with pytest.raises(MatrixError) as caught:
        parse_matrix(rabbit_matrix(measurement, broker, client), "t.yaml")
    assert named in str(caught.value)


def test_rabbitmq_cells_are_labelled_by_their_queue() -> None:
    raw = rabbit_matrix("e2e", {"nodes": 3, "queue_type": "quorum"}, {"acks": "manual", "prefetch": 100})
    (cell,) = select_cells(parse_matrix(raw, "t.yaml"))
    assert (
        cell.spec.version == release.resolve_version("latest") and cell.spec.broker.replicas == 3
    )  # `latest`, resolved
    assert system_of(cell.spec).label(cell.spec) == "rabbitmq n3 quorum R3 confirms acks=manual prefetch=100"
    assert system_of(cell.spec).group_tag(cell.spec) == "quorum"


@pytest.mark.parametrize(
    ("measurement", "client", "metric"),
    [
        ("e2e", {}, "publish"),
        ("e2e", {"confirms": False}, None),
        ("publish", {"confirms": True}, "publish"),
        ("rtt", {"confirms": False}, "rtt"),
    ],
)
def test_only_publisher_confirms_make_a_publish_acknowledgement(measurement: str, client: dict, metric: str) -> None:
    """Without confirms a publish is fire-and-forget: no publish metric to time and none to miss."""
    assert system("rabbitmq").acked_metric({"measurement": measurement, "client": client}) == metric
