"""docker-compose.yaml against what the code expects (no Docker engine here: a static check, see
tests/compose_check.py). Each check also runs on a mutated copy and must fail naming what was broken."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from tests import compose_check as cc

REPO = cc.REPO
COMPOSE_TEXT = (REPO / "docker-compose.yaml").read_text()
ENV_EXAMPLE = (REPO / ".env.example").read_text()
WORKLOAD = {"message_size_bytes": 1024, "rate_per_s": 100, "measure_s": 10}


@pytest.fixture(scope="module")
def expected() -> cc.Expectations:
    return cc.expectations()


@pytest.fixture
def compose() -> dict[str, Any]:
    """A fresh parse per test (the negative tests mutate it), each service with its own mappings as Docker sees
    them: PyYAML shares one object between every alias of an anchor."""
    return json.loads(json.dumps(cc.load_compose()))


def _drop_env(compose: dict[str, Any], key: str) -> None:
    for service in compose["services"].values():
        (service.get("environment") or {}).pop(key, None)


def test_the_scan_finds_what_the_code_uses(expected: cc.Expectations) -> None:
    """The checks below are only as good as this scan: it must see the names the code is known to use."""
    assert {"SIXNINES_LAKE", "SIXNINES_CACHE", "KAFKA_HEAP_OPTS"} <= set(expected.env_vars)
    assert {"spark_default", "sixnines_notify"} <= set(expected.conn_ids)
    assert expected.conn_ids["spark_default"].startswith("plugins/sixnines_airflow/tail.py:")
    assert "sixnines_bench" in expected.pools
    assert "default" in expected.queues
    assert "sixnines" not in expected.queues  # a NATS queue group in bench_tasks, not an Airflow queue


def test_every_airflow_component_runs(compose: dict[str, Any]) -> None:
    assert cc.check_roles(compose) == []
    assert cc.worker_queues(compose) == {
        "airflow-worker": ["default"],
        "loadgen1": ["loadgen_1"],
        "loadgen2": ["loadgen_2"],
    }
    assert {compose["services"][n]["hostname"] for n in ("loadgen1", "loadgen2")} == {"loadgen1", "loadgen2"}


def test_environment_the_code_reads_is_defined(compose: dict[str, Any], expected: cc.Expectations) -> None:
    assert cc.check_environment(compose, expected, cc.dockerfile_env()) == []
    airflow = compose["services"]["airflow-worker"]["environment"]
    assert airflow["SIXNINES_LAKE"] == "${SIXNINES_LAKE:-s3://sixnines/lake}"
    assert airflow["SIXNINES_LAKE_CONN_ID"] == "sixnines_lake_s3"


def test_connections_are_defined_and_parse(compose: dict[str, Any], expected: cc.Expectations) -> None:
    env = cc.example_env(ENV_EXAMPLE)
    assert cc.check_connections(compose, expected) == []
    assert cc.check_connection_values(compose, env) == []
    assert cc.check_connection_hosts(compose, env) == []
    airflow = cc.environment(compose["services"]["airflow-scheduler"])
    # the fixed names of the deployment, whether or not the code of this checkout uses them yet
    for conn_id in ("spark_default", "sixnines_lake_s3", "sixnines_kafka_external", "sixnines_nats_external"):
        assert cc.interpolate(airflow[f"AIRFLOW_CONN_{conn_id.upper()}"], env), conn_id
    assert airflow["AIRFLOW_CONN_SPARK_DEFAULT"] == "spark://spark-master:7077"
    assert '"endpoint_url": "http://minio:9000"' in airflow["AIRFLOW_CONN_SIXNINES_LAKE_S3"]


def test_airflow_options_exist(compose: dict[str, Any]) -> None:
    assert cc.check_airflow_options(compose, cc.airflow_options()) == []
    compose["services"]["loadgen1"]["environment"]["AIRFLOW__CELERY__WORKER_CONCURENCY"] = "2"
    assert cc.check_airflow_options(compose, cc.airflow_options()) == [
        "service loadgen1: AIRFLOW__CELERY__WORKER_CONCURENCY is no Airflow option ([celery] worker_concurency)"
    ]


def test_images_are_pinned(compose: dict[str, Any]) -> None:
    assert cc.check_images(compose, cc.dockerfile_bases()) == []
    assert cc.dockerfile_bases() == ["apache/airflow:3.3.2-python3.11"]  # the Airflow of pyproject.toml


def test_the_image_installs_what_the_services_run(compose: dict[str, Any]) -> None:
    """Celery executor and Postgres metadata DB need their providers, pinned in the `deploy` extra the image
    installs; the Spark services run the pyspark wheel's spark-class from the same image."""
    env = compose["services"]["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {Requirement(r).name for r in extras["deploy"]} == {
        "apache-airflow-providers-celery",
        "apache-airflow-providers-postgres",
    }
    assert '-e ".[deploy]"' in (REPO / "Dockerfile").read_text()
    for name in ("spark-master", "spark-worker-1", "spark-worker-2"):
        assert "build" in compose["services"][name] and compose["services"][name]["command"][0] == "spark-class"


def test_long_running_services_have_healthchecks(compose: dict[str, Any]) -> None:
    assert cc.check_healthchecks(compose) == []
    assert cc.one_shot(compose) == {"airflow-init", "minio-init", "broker-certs"}
    kafka = compose["services"]["kafka1"]["healthcheck"]["test"]
    assert all(str(port) in kafka[-1] for port in (9092, 9094, 9095, 9096))  # every client listener answers


def test_queues_of_the_matrices_have_workers(compose: dict[str, Any], expected: cc.Expectations) -> None:
    assert cc.check_queues(compose, expected) == []


def test_pools_are_created(compose: dict[str, Any], expected: cc.Expectations) -> None:
    assert cc.check_pools(compose, expected) == []


def test_env_example_documents_every_variable() -> None:
    assert cc.check_variables_documented(COMPOSE_TEXT, ENV_EXAMPLE) == []
    required = {k for k, v in cc.compose_variables(COMPOSE_TEXT).items() if v is None}
    assert required <= set(cc.env_file(ENV_EXAMPLE)), "every required variable is listed (empty) in .env.example"


# -- each check fails for the right reason ---------------------------------------------------------------------


def test_a_missing_connection_is_named(compose: dict[str, Any], expected: cc.Expectations) -> None:
    _drop_env(compose, "AIRFLOW_CONN_SPARK_DEFAULT")
    problems = cc.check_connections(compose, expected)
    assert len(problems) == len(cc.airflow_services(compose)) == 7
    assert all("connection spark_default" in p and "AIRFLOW_CONN_SPARK_DEFAULT" in p for p in problems)


def test_a_missing_variable_is_named(compose: dict[str, Any], expected: cc.Expectations) -> None:
    del compose["services"]["loadgen2"]["environment"]["SIXNINES_LAKE"]
    where = expected.env_vars["SIXNINES_LAKE"]  # file:line of the first read, e.g. plugins/…/runtime.py:26
    assert cc.check_environment(compose, expected, cc.dockerfile_env()) == [
        f"service loadgen2: environment variable SIXNINES_LAKE (read at {where}) is not defined"
    ]
    # the image's own ENV counts: without it JAVA_HOME would be missing everywhere
    assert any("JAVA_HOME" in p for p in cc.check_environment(compose, expected, set()))


def test_names_a_new_module_reads_are_picked_up(tmp_path: Path, compose: dict[str, Any]) -> None:
    """What another engineer adds tomorrow is checked without editing this test."""
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "new.py").write_text(
        "import os\n"
        'LAKE_CONN_ENV = "SIXNINES_LAKE_CONN_ID"\n'
        "def conn():\n"
        '    return os.environ.get(LAKE_CONN_ENV, "sixnines_lake_s3"), os.getenv("SIXNINES_SHINY")\n'
        'def op(fallback_conn_id="sixnines_other"):\n'
        '    return "SIXNINES_FLAG" in os.environ, os.environ["SIXNINES_KEY"], task(queue="loadgen_9")\n'
    )
    found = cc.Expectations()
    cc.scan_source(tmp_path / "plugins" / "new.py", found, tmp_path)
    assert set(found.env_vars) == {"SIXNINES_LAKE_CONN_ID", "SIXNINES_SHINY", "SIXNINES_FLAG", "SIXNINES_KEY"}
    assert set(found.conn_ids) == {"sixnines_lake_s3", "sixnines_other"}
    env_problems = cc.check_environment(compose, found, cc.dockerfile_env())
    assert {p.split("variable ")[1].split()[0] for p in env_problems} == {
        "SIXNINES_SHINY",
        "SIXNINES_FLAG",
        "SIXNINES_KEY",
    }
    assert {p.split("connection ")[1].split()[0] for p in cc.check_connections(compose, found)} == {"sixnines_other"}
    assert cc.check_queues(compose, found) == [
        "queue loadgen_9 (named at plugins/new.py:6) has no Celery worker consuming it"
    ]


def test_an_unpinned_image_is_named(compose: dict[str, Any]) -> None:
    compose["services"]["nats2"]["image"] = "nats:latest"
    compose["services"]["redis"]["image"] = "redis"
    compose["services"]["minio"]["image"] = "minio/minio:alpine"
    problems = cc.check_images(compose, ["apache/airflow"])
    assert "service nats2: image nats:latest is not pinned (needs a version tag or a digest)" in problems
    assert "service redis: image redis is not pinned (needs a version tag or a digest)" in problems
    assert "service minio: image minio/minio:alpine is not pinned (needs a version tag or a digest)" in problems
    assert any(p.startswith("service spark-master: Dockerfile FROM: image apache/airflow ") for p in problems)
    compose["services"]["nats2"]["image"] = "nats@sha256:" + "0" * 64
    assert not any("nats2" in p for p in cc.check_images(compose, ["apache/airflow:3.3.2-python3.11"]))


def test_a_missing_healthcheck_is_named(compose: dict[str, Any]) -> None:
    del compose["services"]["kafka2"]["healthcheck"]
    compose["services"]["spark-worker-1"]["depends_on"] = ["spark-master"]
    problems = cc.check_healthchecks(compose)
    assert "service kafka2: long-running but has no healthcheck" in problems
    assert "service airflow-worker: waits for kafka2 to be healthy but kafka2 has no healthcheck" in problems
    assert "service spark-worker-1: depends_on without conditions (use condition: service_healthy)" in problems


def test_a_queue_without_a_worker_is_named(tmp_path: Path, compose: dict[str, Any]) -> None:
    """A matrix placing work on both compose hosts passes (no shipped matrix has `hosts:` yet); once loadgen2's
    worker consumes another queue, the check names loadgen_2 and the matrix host that needs it."""
    matrix = tmp_path / "matrices" / "hosts.yaml"
    matrix.parent.mkdir()
    matrix.write_text(
        "name: hosts\nhosts:\n  loadgen1: {queue: loadgen_1}\n  loadgen2: {queue: loadgen_2, netns: lg2}\n"
        "systems:\n  - system: kafka\n    brokers: external\n    connection: sixnines_kafka_external\n"
    )
    found = cc.Expectations(queues={"default": "default"})
    cc.scan_matrix(matrix, found, tmp_path)
    assert found.conn_ids == {"sixnines_kafka_external": "matrices/hosts.yaml"}
    assert cc.check_queues(compose, found) == []
    assert cc.check_connections(compose, found) == []
    compose["services"]["loadgen2"]["command"] = ["celery", "worker", "-q", "loadgen_3"]
    assert cc.check_queues(compose, found) == [
        "queue loadgen_2 (named at matrices/hosts.yaml hosts.loadgen2) has no Celery worker consuming it"
    ]


def test_a_missing_pool_is_named(compose: dict[str, Any], expected: cc.Expectations) -> None:
    compose["services"]["airflow-init"]["command"] = ["-ec", "airflow db migrate"]
    where = expected.pools["sixnines_bench"]
    assert where.startswith("plugins/sixnines_airflow/runtime.py:")
    assert cc.check_pools(compose, expected) == [
        f"pool sixnines_bench (used at {where}) is not created by an init service (airflow pools set sixnines_bench …)"
    ]


def test_an_undocumented_variable_is_named() -> None:
    text = COMPOSE_TEXT.replace("${SPARK_WORKER_CORES:-2}", "${SPARK_CORES:-2}").replace(
        "http://minio:9000", "http://$MINIO_HOST:9000"
    )
    problems = cc.check_variables_documented(text, ENV_EXAMPLE)
    assert "${SPARK_CORES} is used by docker-compose.yaml but not in .env.example" in problems
    assert "SPARK_WORKER_CORES is in .env.example but docker-compose.yaml never uses it" in problems
    assert "$MINIO_HOST is not written as ${MINIO_HOST} (or escaped as $$MINIO_HOST)" in problems
    bare = ENV_EXAMPLE.replace("# Ports of MinIO's S3 API and web console on the Docker host.\n", "")
    assert cc.check_variables_documented(COMPOSE_TEXT, bare) == [
        "MINIO_API_PORT in .env.example has no comment explaining it",
        "MINIO_CONSOLE_PORT in .env.example has no comment explaining it",
    ]


def test_a_broken_connection_value_is_named(compose: dict[str, Any]) -> None:
    env = cc.example_env(ENV_EXAMPLE)
    service_env = compose["services"]["airflow-apiserver"]["environment"]
    service_env["AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL"] = '{"conn_type": "nats", "host": "nats9"}'
    service_env["AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL"] = '{"host": "kafka1", "extra": {'
    assert cc.check_connection_hosts(compose, env) == [
        "service airflow-apiserver: AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL names host nats9, which is no service of"
        " docker-compose.yaml"
    ]
    problems = cc.check_connection_values(compose, env)
    assert len(problems) == 1 and problems[0].startswith(
        "service airflow-apiserver: AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL is not valid JSON"
    )


def test_deployment_doc_example_targets_this_deployment(tmp_path: Path, compose: dict[str, Any]) -> None:
    """docs/deployment.md: its matrix fragment names connections and queues this file provides."""
    readme = (REPO / "docs" / "deployment.md").read_text()
    (fragment,) = [b for b in re.findall(r"```yaml\n(.*?)```", readme, flags=re.S) if "brokers: external" in b]
    (tmp_path / "readme.yaml").write_text(fragment)
    found = cc.Expectations()
    cc.scan_matrix(tmp_path / "readme.yaml", found, tmp_path)
    assert set(found.conn_ids) == {"sixnines_kafka_external", "sixnines_nats_external"}
    assert set(found.queues) == {"loadgen_1", "loadgen_2"}
    assert cc.check_connections(compose, found) == [] and cc.check_queues(compose, found) == []
    assert "cp .env.example .env" in readme and "docker compose up -d" in readme
    # its cells, expanded as the harness does, are routes the compose brokers serve
    matrix = yaml.safe_load(fragment) | {"name": "readme", "workload": WORKLOAD, "measurements": ["e2e"]}
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "readme.yaml").write_text(yaml.safe_dump(matrix))
    routes = cc.matrix_routes(tmp_path)
    assert {(r.security, r.mechanism) for r in routes if r.system == "kafka"} == {
        ("plaintext", None),
        ("ssl", None),
        ("sasl_plaintext", None),
        ("sasl_ssl", None),
        ("sasl_ssl", "SCRAM-SHA-256"),
    }
    assert cc.check_secured_routes(compose, cc.example_env(ENV_EXAMPLE), routes) == []


def test_interpolation_follows_compose() -> None:
    env = {"SET": "x", "EMPTY": ""}
    assert cc.interpolate("${SET}-${EMPTY:-d}-${EMPTY-d}-${UNSET:-u}-$${SET}", env) == "x-d--u-${SET}"
    with pytest.raises(KeyError, match="set it"):
        cc.interpolate("${UNSET:?set it}", env)
    assert cc.compose_variables("${A:-1} ${B:?x} $${C}") == {"A": "1", "B": None}


# -- the secured compose brokers: every route a matrix measures is served --------------------------------------

KAFKA_ROUTES = [
    cc.Route("test", "sixnines_kafka_external", "kafka", security, mechanism)
    for security, mechanism in [
        ("plaintext", None),
        ("ssl", None),
        ("sasl_plaintext", "SCRAM-SHA-256"),
        ("sasl_plaintext", "SCRAM-SHA-512"),
        ("sasl_ssl", "SCRAM-SHA-256"),
        ("sasl_ssl", "SCRAM-SHA-512"),
        ("sasl_ssl", None),  # the connection's own mechanism (SCRAM-SHA-512)
        (None, None),  # the connection's default protocol (PLAINTEXT)
    ]
]
NATS_ROUTE = cc.Route("test", "sixnines_nats_external", "nats")


@pytest.fixture(scope="module")
def matrix_routes() -> list[cc.Route]:
    return cc.matrix_routes()


def test_the_matrices_routes_are_served_by_the_compose_brokers(
    compose: dict[str, Any], matrix_routes: list[cc.Route]
) -> None:
    """matrices/external.yaml measures Kafka over plaintext, TLS and SASL_SSL and NATS over the compose
    connections: each has a listener, a user, and the CA where the connection says."""
    kafka = {r.security for r in matrix_routes if r.conn_id == "sixnines_kafka_external"}
    assert {"plaintext", "ssl", "sasl_ssl"} <= kafka
    assert any(r.conn_id == "sixnines_nats_external" for r in matrix_routes)
    assert cc.check_secured_routes(compose, cc.example_env(ENV_EXAMPLE), matrix_routes) == []


def test_every_kafka_security_protocol_and_mechanism_has_a_route(compose: dict[str, Any]) -> None:
    """Routes no shipped matrix uses yet (SASL_PLAINTEXT, SCRAM-SHA-256) are served too."""
    env = cc.example_env(ENV_EXAMPLE)
    assert cc.check_secured_routes(compose, env, [*KAFKA_ROUTES, NATS_ROUTE]) == []
    certs = cc.certificate_service(compose)
    assert certs is not None and certs[:2] == ("broker-certs", "broker-certs") and certs.ca_volume == "broker-ca"
    assert {f"{s}{n}" for s in ("kafka", "nats") for n in (1, 2, 3)} <= set(certs.hosts)
    for worker in ("airflow-worker", "loadgen1", "loadgen2"):  # the CA alone: no broker key on a worker
        assert cc.volume_at(compose["services"][worker], "/opt/sixnines/certs/ca.pem") == "broker-ca"
    conn = json.loads(
        cc.interpolate(compose["services"]["loadgen1"]["environment"]["AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL"], env)
    )
    assert conn["password"] == env["KAFKA_SASL_PASSWORD"] and conn["login"] == "sixnines"


def _kafka_config(compose: dict[str, Any], old: str, new: str) -> None:
    content = compose["configs"]["kafka-server"]["content"]
    assert old in content
    compose["configs"]["kafka-server"]["content"] = content.replace(old, new)


def _set_conn(compose: dict[str, Any], conn_id: str, edit: Any) -> None:
    """Apply `edit` to the (interpolated) JSON of a connection in every Airflow service."""
    env = cc.example_env(ENV_EXAMPLE)
    key = f"AIRFLOW_CONN_{conn_id.upper()}"
    for service in compose["services"].values():
        values = service.get("environment") or {}
        if key in values:
            conn = json.loads(cc.interpolate(values[key], env))
            edit(conn)
            values[key] = json.dumps(conn)


def test_a_missing_listener_is_named(compose: dict[str, Any]) -> None:
    env = cc.example_env(ENV_EXAMPLE)
    node = compose["services"]["kafka2"]["environment"]
    node["KAFKA_ADVERTISED_LISTENERS"] = node["KAFKA_ADVERTISED_LISTENERS"].replace(",SASL_SSL://kafka2:9096", "")
    assert cc.check_secured_routes(compose, env, [KAFKA_ROUTES[4]]) == [
        "test: kafka client.security sasl_ssl via sixnines_kafka_external: kafka2:9096 is no SASL_SSL listener of "
        "service kafka2 (it advertises kafka2:9092 (PLAINTEXT), kafka2:9094 (SSL), kafka2:9095 (SASL_PLAINTEXT))"
    ]
    _kafka_config(compose, ",SSL://:9094", "")
    assert cc.check_secured_routes(compose, env, [KAFKA_ROUTES[1]]) == [
        f"test: kafka client.security ssl via sixnines_kafka_external: service {n} advertises SSL on 9094 but does "
        "not listen there"
        for n in ("kafka1", "kafka2", "kafka3")
    ]


def test_a_connection_pointing_at_the_wrong_listener_is_named(compose: dict[str, Any]) -> None:
    _set_conn(compose, "sixnines_kafka_external", lambda c: c["extra"]["listeners"].update(SSL="kafka1:9092"))
    assert cc.check_secured_routes(compose, cc.example_env(ENV_EXAMPLE), [KAFKA_ROUTES[1]]) == [
        "test: kafka client.security ssl via sixnines_kafka_external: kafka1:9092 is no SSL listener of service "
        "kafka1 (it advertises kafka1:9092 (PLAINTEXT), kafka1:9094 (SSL), kafka1:9095 (SASL_PLAINTEXT), "
        "kafka1:9096 (SASL_SSL))"
    ]


def test_a_mechanism_or_user_the_brokers_lack_is_named(compose: dict[str, Any]) -> None:
    env = cc.example_env(ENV_EXAMPLE)
    _kafka_config(
        compose, "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512", "sasl.enabled.mechanisms=SCRAM-SHA-512"
    )
    _kafka_config(compose, "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "# removed")
    problems = cc.check_secured_routes(compose, env, [KAFKA_ROUTES[2]])
    label = "test: kafka client.security sasl_plaintext via sixnines_kafka_external"
    assert f"{label}: service kafka3 does not enable SASL mechanism SCRAM-SHA-256 (SCRAM-SHA-512)" in problems
    assert f"{label}: service kafka1 has no listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config" in problems
    assert len(problems) == 6

    compose = json.loads(json.dumps(cc.load_compose()))
    _set_conn(compose, "sixnines_kafka_external", lambda c: c.update(login="someone"))
    problems = cc.check_secured_routes(compose, env, [KAFKA_ROUTES[5]])
    assert len(problems) == 3 and problems[0] == (
        "test: kafka client.security sasl_ssl via sixnines_kafka_external: service kafka1 does not create the "
        "connection's user 'someone' for SCRAM-SHA-512 at format time (--add-scram users: "
        "[('SCRAM-SHA-256', 'sixnines'), ('SCRAM-SHA-512', 'sixnines')])"
    )


def test_a_ca_the_workers_cannot_read_is_named(compose: dict[str, Any]) -> None:
    env = cc.example_env(ENV_EXAMPLE)
    volumes = compose["services"]["loadgen2"]["volumes"]
    volumes.remove("broker-ca:/opt/sixnines/certs:ro")
    problems = cc.check_secured_routes(compose, env, [KAFKA_ROUTES[1], NATS_ROUTE])
    assert problems == [
        "test: kafka client.security ssl via sixnines_kafka_external: /opt/sixnines/certs/ca.pem is not on volume "
        "broker-ca in service loadgen2 (mounted there: None)",
        "test: nats via sixnines_nats_external: /opt/sixnines/certs/ca.pem is not on volume broker-ca in "
        "service loadgen2 (mounted there: None)",
    ]
    assert cc.check_secured_routes(compose, env, [KAFKA_ROUTES[0]]) == []  # plaintext needs no CA
    compose["services"]["broker-certs"]["command"].remove("kafka3")
    compose["services"]["broker-certs"]["command"].remove("--host")
    assert cc.check_secured_routes(compose, env, [KAFKA_ROUTES[1]])[-1] == (
        "test: kafka client.security ssl via sixnines_kafka_external: the broker certificate (broker-certs) does "
        "not name kafka3"
    )


def test_nats_tls_and_user_mismatches_are_named(compose: dict[str, Any]) -> None:
    env = cc.example_env(ENV_EXAMPLE)

    def plain(conn: dict[str, Any]) -> None:
        del conn["extra"]["tls_ca_file"]
        conn["password"] = "other"

    _set_conn(compose, "sixnines_nats_external", plain)
    problems = cc.check_secured_routes(compose, env, [NATS_ROUTE])
    label = "test: nats via sixnines_nats_external"
    assert f"{label}: service nats2 requires TLS but the connection names no extra.tls_ca_file" in problems
    assert f"{label}: the connection's user 'sixnines' is not service nats2's authorization user" in problems
    assert len(problems) == 6


# -- secrets never reach a process's arguments -----------------------------------------------------------------


def test_no_secret_is_a_command_argument(compose: dict[str, Any]) -> None:
    """A program's arguments are in the process table for every user to read: a secret variable may appear in
    a command only as an argument of a shell builtin (printf into a private file or a pipe, export)."""
    assert cc.check_secret_arguments(compose) == []
    assert "@$$args" in cc.command_text(compose["services"]["kafka1"])  # the storage tool reads an argument file


def test_a_secret_passed_as_an_argument_is_named(compose: dict[str, Any]) -> None:
    init = compose["services"]["minio-init"]
    init["command"] = [
        'mc alias set lake http://minio:9000 "$${MINIO_ROOT_USER}" "$${MINIO_ROOT_PASSWORD}"',
    ]
    kafka = compose["services"]["kafka2"]
    kafka["command"] = [
        'props=x\n/opt/kafka/bin/kafka-storage.sh format --config "$$props" \\\n'
        '  --add-scram "SCRAM-SHA-256=[name=$$KAFKA_SASL_USERNAME,password=$$KAFKA_SASL_PASSWORD]"\n'
        "printf '%s\\n' \"$$KAFKA_SASL_PASSWORD\" | tool --password-stdin"
    ]
    compose["services"]["spark-master"]["command"] = ["spark-class", "--secret", "${AIRFLOW_API_SECRET_KEY}"]
    assert cc.check_secret_arguments(compose) == [
        "service kafka2: $KAFKA_SASL_PASSWORD is an argument of /opt/kafka/bin/kafka-storage.sh (every user sees "
        "a process's arguments): hand it over in a 0600 file or on standard input",
        "service minio-init: $MINIO_ROOT_PASSWORD is an argument of mc (every user sees a process's arguments): "
        "hand it over in a 0600 file or on standard input",
        "service spark-master: $AIRFLOW_API_SECRET_KEY is an argument of spark-class (every user sees a "
        "process's arguments): hand it over in a 0600 file or on standard input",
    ]


# -- least exposure: ports, credentials, example values, routes, keys ------------------------------------------


def test_published_ports_listen_on_the_docker_hosts_loopback_by_default(compose: dict[str, Any]) -> None:
    assert cc.check_published_ports(compose, {}) == []
    assert cc.published(compose, {}) == {
        "airflow-apiserver": ["127.0.0.1:8080:8080"],
        "minio": ["127.0.0.1:9000:9000", "127.0.0.1:9001:9001"],
        "spark-master": ["127.0.0.1:8081:8080"],
    }
    assert cc.published(compose, {"SIXNINES_PUBLISH_ADDRESS": "10.0.0.5"})["minio"][0] == "10.0.0.5:9000:9000"


def test_a_port_on_every_interface_is_named(compose: dict[str, Any]) -> None:
    compose["services"]["spark-master"]["ports"] = ["${SPARK_UI_PORT:-8081}:8080"]
    compose["services"]["minio"]["ports"] = [{"target": 9000, "published": 9000}]
    assert cc.check_published_ports(compose, {}) == [
        "service minio publishes 9000 on every interface of the Docker host (give it host_ip "
        "${SIXNINES_PUBLISH_ADDRESS:-127.0.0.1})",
        "service spark-master publishes 8081:8080 on every interface of the Docker host (prefix it with "
        "${SIXNINES_PUBLISH_ADDRESS:-127.0.0.1}:)",
    ]


def test_the_lake_has_its_own_minio_user(compose: dict[str, Any]) -> None:
    assert cc.check_lake_credentials(compose) == []
    env = cc.environment(compose["services"]["loadgen1"])
    assert "MINIO_LAKE_PASSWORD" in env["AWS_SECRET_ACCESS_KEY"] and "MINIO_LAKE" in env["AWS_ACCESS_KEY_ID"]
    init = cc.command_text(compose["services"]["minio-init"])
    assert "mc admin policy attach lake sixnines-lake" in init and '"arn:aws:s3:::${bucket}/*"' in init.replace(
        "$$", "$"
    )
    compose["services"]["loadgen1"]["environment"]["AWS_SECRET_ACCESS_KEY"] = "${MINIO_ROOT_PASSWORD}"
    compose["services"]["loadgen2"]["environment"]["AIRFLOW_CONN_SIXNINES_LAKE_S3"] = (
        '{"conn_type": "aws", "login": "${MINIO_ROOT_USER}", "password": "${MINIO_ROOT_PASSWORD}"}'
    )
    assert cc.check_lake_credentials(compose) == [
        "service loadgen1: AWS_SECRET_ACCESS_KEY uses MinIO's root account (MINIO_ROOT_PASSWORD); the lake has "
        "its own user",
        "service loadgen2: AIRFLOW_CONN_SIXNINES_LAKE_S3 uses MinIO's root account (MINIO_ROOT_PASSWORD, "
        "MINIO_ROOT_USER); the lake has its own user",
    ]


def test_the_example_env_is_refused_until_its_secrets_are_set() -> None:
    """Every `${X:?…}` of the compose file is empty in .env.example, so compose refuses to start on it."""
    assert cc.check_example_refused(COMPOSE_TEXT, ENV_EXAMPLE) == []
    placeholder = ENV_EXAMPLE.replace("\nPOSTGRES_PASSWORD=\n", "\nPOSTGRES_PASSWORD=change-me-postgres\n")
    assert cc.check_example_refused(COMPOSE_TEXT, placeholder) == [
        "POSTGRES_PASSWORD has a value in .env.example (change-me-postgres): compose would start on it; leave it "
        "empty so `${POSTGRES_PASSWORD:?…}` refuses to start until it is set"
    ]
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        cc.interpolate(
            cc.environment(cc.load_compose()["services"]["postgres"])["POSTGRES_PASSWORD"], cc.env_file(ENV_EXAMPLE)
        )


def test_every_secret_is_required_before_compose_starts() -> None:
    """No secret has a default: compose refuses to start until each is set (the Fernet key too: without it the
    connections defined in the UI are stored unencrypted)."""
    assert cc.check_secrets_required(COMPOSE_TEXT) == []
    assert "AIRFLOW_FERNET_KEY" in cc.compose_variables(COMPOSE_TEXT)
    assert cc.env_file(ENV_EXAMPLE)["AIRFLOW_FERNET_KEY"] == ""  # listed with the secrets to set, empty
    defaulted = COMPOSE_TEXT.replace("${NATS_PASSWORD:?set NATS_PASSWORD in .env}", "${NATS_PASSWORD:-}")
    assert cc.check_secrets_required(defaulted) == [
        "NATS_PASSWORD is a secret compose starts without: write it `${NATS_PASSWORD:?set NATS_PASSWORD in .env}`"
    ]


def test_nats_routes_need_a_certificate_of_the_deployments_ca(compose: dict[str, Any]) -> None:
    assert cc.check_nats_routes(compose) == []
    content = compose["configs"]["nats-server"]["content"]
    compose["configs"]["nats-server"]["content"] = content.replace("verify: true\n", "")
    assert cc.check_nats_routes(compose) == [
        "service nats1: cluster routes accept peers without a certificate (cluster tls needs verify: true and ca_file)",
        "service nats2: cluster routes accept peers without a certificate (cluster tls needs verify: true and ca_file)",
        "service nats3: cluster routes accept peers without a certificate (cluster tls needs verify: true and ca_file)",
    ]
    compose["configs"]["nats-server"]["content"] = content.split("cluster {")[0]
    assert cc.check_nats_routes(compose)[0] == "service nats1: cluster routes have no tls block (plaintext routes)"


def test_workers_mount_the_ca_but_no_broker_key(compose: dict[str, Any]) -> None:
    assert cc.check_key_mounts(compose) == []
    certs = cc.certificate_service(compose)
    assert certs is not None and certs.key_volume == "broker-certs" and certs.ca_volume == "broker-ca"
    compose["services"]["loadgen2"]["volumes"].append("broker-certs:/opt/sixnines/keys:ro")
    assert cc.check_key_mounts(compose) == [
        "service loadgen2 mounts broker-certs (the brokers' private keys) at /opt/sixnines/keys; a worker needs "
        "only the CA (broker-ca)"
    ]
