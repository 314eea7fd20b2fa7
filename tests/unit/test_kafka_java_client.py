"""`client: {library: java}` without a broker: validation by field, cell ids of librdkafka cells unchanged, and which
client settings reach the JVM worker's plan (on disk) and which only its environment (secrets)."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.errors import MatrixError
from bench_tasks.spec.cell import cell_id
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.kafka.jvm_client import SECRET_ENV, plan_settings, secret_env
from bench_tasks.systems.kafka.settings import KafkaCell, KafkaClient

from .test_placement import placed, problems

WORKLOAD = {"message_size_bytes": 100, "rate_per_s": 1000, "measure_s": 1}


def kafka_cell(client: dict[str, Any], **workload: Any) -> KafkaCell:
    raw = {"system": "kafka", "version": "4.3.2", "measurement": "e2e", "workload": {**WORKLOAD, **workload}}
    return KafkaCell.model_validate({**raw, "client": client})


def matrix_problems(client: dict[str, Any], **workload: Any) -> str:
    raw = {
        "name": "java",
        "systems": [{"system": "kafka", "versions": ["4.3.2"], "client": client}],
        "workload": {**WORKLOAD, **workload},
        "measurements": ["e2e"],
    }
    with pytest.raises(MatrixError) as caught:
        parse_matrix(raw, "java.yaml")
    return str(caught.value)


def test_an_unknown_library_is_refused_naming_the_field() -> None:
    problems = matrix_problems({"library": "jvm"})
    assert "client.library" in problems and "'librdkafka' or 'java'" in problems


@pytest.mark.parametrize(
    ("client", "workload", "field"),
    [
        ({"library": "java", "consumer_mode": "assigned"}, {"consumers": 1}, "client.consumer_mode"),
        ({"library": "java"}, {"lagging_consumers": 1, "prefill_messages": 10}, "workload.lagging_consumers"),
        ({"library": "java", "jvm_flags": ["-cp=/elsewhere"]}, {}, "client.jvm_flags: -cp=/elsewhere"),
        ({"jvm_flags": ["-Xmx1g"]}, {}, "client.jvm_flags: only for client.library java (is librdkafka)"),
    ],
)
def test_what_the_java_path_cannot_do_is_refused_naming_the_field(
    client: dict[str, Any], workload: dict[str, Any], field: str
) -> None:
    assert field in matrix_problems(client, **workload)


def test_a_java_client_cell_placed_on_other_hosts_is_refused_naming_the_field() -> None:
    raw = placed()
    raw["systems"] = [{"system": "kafka", "versions": ["4.3.2"], "client": {"library": "java"}}]
    assert "workload.placement: the Java client runs in the JVM worker, on the driving host only" in problems(raw)


def test_a_librdkafka_cell_keeps_its_id_whether_or_not_it_names_the_library() -> None:
    assert cell_id(kafka_cell({"library": "librdkafka"})) == cell_id(kafka_cell({}))
    assert cell_id(kafka_cell({"library": "java"})) != cell_id(kafka_cell({}))
    assert "library" not in kafka_cell({}).client.model_dump()


def test_client_properties_pass_through_and_secrets_stay_out_of_the_plan() -> None:
    client = KafkaClient(
        library="java",
        keys="round_robin",
        producer={"acks": 1, "linger.ms": 5, "enable.idempotence": False, "compression.type": "lz4"},
        consumer={"fetch.max.wait.ms": 10, "sasl.jaas.config": 'Module required password="s3cret-p";'},
    )
    plan = plan_settings(client)
    assert plan == {
        "kafka.keys": "round_robin",
        "kafka.start_from": "end",
        "kafka.producer.acks": "1",
        "kafka.producer.linger.ms": "5",
        "kafka.producer.enable.idempotence": "false",  # as the Java client's parser reads a boolean
        "kafka.producer.compression.type": "lz4",
        "kafka.consumer.fetch.max.wait.ms": "10",
    }
    env = secret_env(client, {})
    assert "s3cret-p" in env[SECRET_ENV] and env[SECRET_ENV].startswith("kafka.consumer.sasl.jaas.config=")
    assert not any("s3cret-p" in v for v in plan.values())


def test_the_cells_sasl_login_reaches_the_java_client_as_jaas_in_the_environment_only() -> None:
    access = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "sixnines",
        "sasl.password": "pw-9f3",
        "ssl.ca.location": "/tls/ca.pem",
    }
    text = secret_env(KafkaClient(library="java"), access)[SECRET_ENV]
    lines = text.splitlines()
    assert "kafka.common.security.protocol=SASL_SSL" in lines
    assert "kafka.common.ssl.truststore.type=PEM" in lines
    jaas = next(line for line in lines if line.startswith("kafka.common.sasl.jaas.config="))
    assert "ScramLoginModule required" in jaas and 'password="pw-9f3"' in jaas
    assert secret_env(KafkaClient(library="java"), {}) == {}  # plaintext, nothing secret: no environment at all
