"""`client: {library: java}` of RabbitMQ (amqp-client) and Redis (Lettuce) without a server: validation by field,
cell ids of cells on the Python client unchanged, the JVM worker's plan keys, and the login kept to the worker's
environment. (Kafka's: tests/unit/test_kafka_java_client.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.errors import BrokerError, MatrixError
from bench_tasks.spec.cell import cell_id
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems import system_of
from bench_tasks.systems.rabbitmq import jvm_client as rabbitmq_java
from bench_tasks.systems.rabbitmq.settings import RabbitmqCell
from bench_tasks.systems.redis import jvm_client as redis_java
from bench_tasks.systems.redis.settings import RedisCell

WORKLOAD = {"message_size_bytes": 100, "rate_per_s": 1000, "measure_s": 1}
PYTHON_CLIENT = {"rabbitmq": "pika", "redis": "redis-py"}
MODELS = {"rabbitmq": (RabbitmqCell, "3.10.8"), "redis": (RedisCell, "7.0.15")}


def a_cell(system: str, client: dict[str, Any], broker: dict[str, Any] | None = None) -> Any:
    model, version = MODELS[system]
    raw = {"system": system, "version": version, "measurement": "e2e", "workload": WORKLOAD}
    return model.model_validate({**raw, "broker": broker or {}, "client": client})


def matrix_problems(entry: dict[str, Any], measurements: tuple[str, ...] = ("e2e",)) -> str:
    version = MODELS[entry["system"]][1]
    raw = {"name": "java", "systems": [{"versions": [version], **entry}], "workload": WORKLOAD}
    with pytest.raises(MatrixError) as caught:
        parse_matrix({**raw, "measurements": list(measurements)}, "java.yaml")
    return str(caught.value)


@pytest.mark.parametrize("system", ["rabbitmq", "redis"])
def test_an_unknown_library_is_refused_naming_the_field(system: str) -> None:
    problems = matrix_problems({"system": system, "client": {"library": "jvm"}})
    assert "client.library" in problems and f"'{PYTHON_CLIENT[system]}' or 'java'" in problems


JAVA = {"library": "java"}
STREAM_READER = {"library": "java", "acks": "manual", "prefetch": 10}


@pytest.mark.parametrize(
    ("system", "client", "broker", "measurement", "field"),
    [
        ("rabbitmq", JAVA, {}, "rtt", "measurement 'rtt': the JVM worker has no responder"),
        ("rabbitmq", STREAM_READER, {"queue_type": "stream"}, "e2e", "broker.queue_type 'stream'"),
        ("rabbitmq", {**JAVA, "connect": {"heartbeat": 10}}, {}, "e2e", "client.connect"),
        ("rabbitmq", {"jvm_flags": ["-Xmx1g"]}, {}, "e2e", "only for client.library java (is pika)"),
        ("redis", JAVA, {}, "rtt", "measurement 'rtt': the JVM worker has no responder"),
        ("redis", {**JAVA, "connect": {"db": 1}}, {}, "e2e", "client.connect"),
        ("redis", {**JAVA, "jvm_flags": ["-cp=/x"]}, {}, "e2e", "client.jvm_flags: -cp"),
        ("redis", {"jvm_flags": ["-Xmx1g"]}, {}, "e2e", "only for client.library java (is redis-py)"),
    ],
)
def test_what_the_java_path_cannot_do_is_refused_naming_the_field(
    system: str, client: dict[str, Any], broker: dict[str, Any], measurement: str, field: str
) -> None:
    assert field in matrix_problems({"system": system, "client": client, "broker": broker}, (measurement,))


@pytest.mark.parametrize("system", ["rabbitmq", "redis"])
def test_a_python_client_cell_keeps_its_id_whether_or_not_it_names_the_library(system: str) -> None:
    python = PYTHON_CLIENT[system]
    assert cell_id(a_cell(system, {"library": python})) == cell_id(a_cell(system, {}))
    assert cell_id(a_cell(system, {"library": "java"})) != cell_id(a_cell(system, {}))
    assert "library" not in a_cell(system, {}).client.model_dump()
    java = a_cell(system, {"library": "java"})
    assert system_of(java).label(java).endswith(" client=java")
    assert not system_of(a_cell(system, {})).label(a_cell(system, {})).endswith(" client=java")


def test_the_plans_carry_the_route_and_client_behaviour() -> None:
    rabbitmq = a_cell("rabbitmq", {"library": "java", "acks": "manual", "prefetch": 50}, {"queue_type": "quorum"})
    assert rabbitmq_java.plan_settings(rabbitmq) == {
        "rabbitmq.exchange": "default",
        "rabbitmq.persistent": "true",  # a quorum queue writes every message to disk
        "rabbitmq.confirms": "true",
        "rabbitmq.acks": "manual",
        "rabbitmq.prefetch": "50",
        "rabbitmq.partition": "0",
    }
    redis = a_cell("redis", {"library": "java", "noack": True}, {"mode": "streams", "stream": {"maxlen": None}})
    assert redis_java.plan_settings(redis) == {
        "redis.mode": "streams",
        "redis.maxlen": "-1",  # never trimmed
        "redis.group": "sixnines",
        "redis.read_count": "128",
        "redis.block_ms": "1000",
        "redis.noack": "true",
    }


@pytest.mark.parametrize(("module", "ca"), [(rabbitmq_java, "tls_ca_file"), (redis_java, "ssl_ca_certs")])
def test_the_login_reaches_the_worker_only_in_its_environment(module: Any, ca: str) -> None:
    env = module.secret_env({"username": "bench", "password": "s3cret=p"})
    assert env == {module.SECRET_ENV: "password=s3cret=p\nusername=bench\n"}  # as java.util.Properties reads it
    assert module.secret_env({}) == {}
    with pytest.raises(BrokerError, match="does not speak TLS"):
        module.secret_env({"username": "bench", ca: "/ca.pem"})
