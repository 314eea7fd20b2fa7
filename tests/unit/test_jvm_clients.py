"""RabbitMQ's `client: {library: java}` without a broker: validation by field, cell ids of pika cells unchanged, the
JVM worker's plan keys, and the login kept to the worker's environment."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.errors import BrokerError, MatrixError
from bench_tasks.spec.cell import cell_id
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems import system_of
from bench_tasks.systems.rabbitmq.jvm_client import SECRET_ENV, plan_settings, secret_env
from bench_tasks.systems.rabbitmq.settings import RabbitmqCell

WORKLOAD = {"message_size_bytes": 100, "rate_per_s": 1000, "measure_s": 1}


def rabbitmq_cell(client: dict[str, Any], broker: dict[str, Any] | None = None) -> RabbitmqCell:
    raw = {"system": "rabbitmq", "version": "3.10.8", "measurement": "e2e", "workload": WORKLOAD}
    return RabbitmqCell.model_validate({**raw, "broker": broker or {}, "client": client})


def matrix_problems(system: dict[str, Any], measurements: tuple[str, ...] = ("e2e",), **extra: Any) -> str:
    raw = {
        "name": "java",
        "systems": [{"system": "rabbitmq", "versions": ["3.10.8"], **system}],
        "workload": WORKLOAD,
        "measurements": list(measurements),
        **extra,
    }
    with pytest.raises(MatrixError) as caught:
        parse_matrix(raw, "java.yaml")
    return str(caught.value)


def test_an_unknown_library_is_refused_naming_the_field() -> None:
    problems = matrix_problems({"client": {"library": "jvm"}})
    assert "client.library" in problems and "'pika' or 'java'" in problems


@pytest.mark.parametrize(
    ("system", "measurements", "field"),
    [
        ({"client": {"library": "java"}}, ("rtt",), "measurement 'rtt': the JVM worker has no responder"),
        (
            {"client": {"library": "java", "acks": "manual", "prefetch": 10}, "broker": {"queue_type": "stream"}},
            ("e2e",),
            "broker.queue_type 'stream'",
        ),
        ({"client": {"library": "java", "connect": {"heartbeat": 10}}}, ("e2e",), "client.connect"),
        ({"client": {"library": "java", "jvm_flags": ["-cp=/elsewhere"]}}, ("e2e",), "client.jvm_flags: -cp"),
        ({"client": {"jvm_flags": ["-Xmx1g"]}}, ("e2e",), "client.jvm_flags: only for client.library java (is pika)"),
    ],
)
def test_what_the_java_path_cannot_do_is_refused_naming_the_field(
    system: dict[str, Any], measurements: tuple[str, ...], field: str
) -> None:
    assert field in matrix_problems(system, measurements)


def test_a_pika_cell_keeps_its_id_whether_or_not_it_names_the_library() -> None:
    assert cell_id(rabbitmq_cell({"library": "pika"})) == cell_id(rabbitmq_cell({}))
    assert cell_id(rabbitmq_cell({"library": "java"})) != cell_id(rabbitmq_cell({}))
    assert "library" not in rabbitmq_cell({}).client.model_dump()


def test_the_plan_carries_the_queue_and_client_behaviour_and_the_label_names_the_client() -> None:
    cell = rabbitmq_cell({"library": "java", "acks": "manual", "prefetch": 50}, {"queue_type": "quorum"})
    assert plan_settings(cell) == {
        "rabbitmq.exchange": "default",
        "rabbitmq.persistent": "true",  # a quorum queue writes every message to disk
        "rabbitmq.confirms": "true",
        "rabbitmq.acks": "manual",
        "rabbitmq.prefetch": "50",
        "rabbitmq.partition": "0",
    }
    assert system_of(cell).label(cell).endswith(" client=java")
    assert not system_of(rabbitmq_cell({})).label(rabbitmq_cell({})).endswith(" client=java")


def test_the_login_reaches_the_worker_only_in_its_environment() -> None:
    env = secret_env({"username": "bench", "password": "s3cret=p"})
    assert env == {SECRET_ENV: "password=s3cret=p\nusername=bench\n"}  # as java.util.Properties reads it
    assert "s3cret" not in str(plan_settings(rabbitmq_cell({"library": "java"})))
    assert secret_env({}) == {}
    with pytest.raises(BrokerError, match="does not speak TLS"):
        secret_env({"username": "bench", "tls_ca_file": "/ca.pem"})
