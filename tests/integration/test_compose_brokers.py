"""The compose brokers' own configuration, run for real on loopback (no Docker engine here to run the images).

What docker-compose.yaml gives its brokers is taken from the file itself, with only what a single host needs
rewritten (service names → localhost, fixed ports → free ports, container paths → temporary folders, a one-node
quorum with replication factor 1): the `broker-certs` service's command makes the TLS material, the Kafka nodes'
start script (entrypoint and command, run by bash as the container would) formats storage with the SCRAM users
and starts Kafka 4.3.1 (the image's release, jars from Maven Central) on the `kafka-server` settings, nats-server
runs on the `nats-server` config and the node's own flags. Then one short cell per route a matrix can measure
runs through the deployment's own connections (`AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL` / `…_NATS_EXTERNAL`, as
compose interpolates them from .env.example with its secrets set): Kafka over PLAINTEXT, SSL, SASL_PLAINTEXT and
SASL_SSL with both SCRAM mechanisms, NATS JetStream over TLS with the user; a wrong password and a client without
TLS are refused; the NATS routes take only peers with a certificate of the deployment's CA.
Differences from the containers: nats-server is the bundled release, not the image's 2.12.1; the JVM is this
host's; the quorum has one node instead of three.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient
from rich.console import Console

from bench_tasks.brokers.connections import parse_connection
from bench_tasks.brokers.patience import with_patience
from bench_tasks.brokers.ports import free_ports
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.systems.kafka.access import kafka_access
from bench_tasks.systems.kafka.admin import admin_client
from bench_tasks.systems.kafka.cluster import _LOG4J2_CONFIG
from bench_tasks.systems.kafka.jvm import java_binary
from bench_tasks.systems.kafka.release import release_of
from tests import compose_check as cc

pytestmark = pytest.mark.usefixtures("no_orphans")

KAFKA_VERSION = "4.3.1"  # the compose image's release (apache/kafka:4.3.1)
KAFKA_PORTS = (9092, 9093, 9094, 9095, 9096)  # the compose listeners: PLAINTEXT, CONTROLLER, SSL, SASL_*
# What is under test is that each route carries every message, not the generator's precision: on a shared
# two-core host (a JVM broker starting beside it) a SASL handshake can hold the schedule back past the default
# lag gate, so the gate is wide here.
SHORT = {"message_size_bytes": 256, "rate_per_s": 200, "warmup_s": 1, "measure_s": 1, "cooldown_s": 0.5}
SHORT |= {"max_schedule_lag_ms": 2000}
CERTS = "/opt/sixnines/certs"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return cc.load_compose()


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """The variables compose interpolates the file with: .env.example with its (empty) secrets set."""
    return cc.example_env((cc.REPO / ".env.example").read_text())


def service_env(compose: dict[str, Any], name: str, env: dict[str, str]) -> dict[str, str]:
    return {k: cc.interpolate(v, env) for k, v in cc.environment(compose["services"][name]).items()}


def connection(compose: dict[str, Any], env: dict[str, str], conn_id: str) -> dict[str, Any]:
    return json.loads(service_env(compose, "loadgen1", env)[f"AIRFLOW_CONN_{conn_id.upper()}"])


def rewrite(text: str, mapping: dict[str, str]) -> str:
    for old, new in mapping.items():
        text = text.replace(old, new)
    return text


@pytest.fixture(scope="module")
def certs(compose: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The broker-certs service's command, run with its folder moved to a temporary one."""
    folder = tmp_path_factory.mktemp("certs")
    command = [str(a) for a in compose["services"]["broker-certs"]["command"]]
    assert command[:5] == ["python", "-m", "bench_tasks", "brokers", "certs"] and command[5] == CERTS
    command = [sys.executable, *command[1:5], str(folder), *command[6:]]
    command = [cc.interpolate(a, {}).replace("/opt/sixnines/ca", str(folder / "ca-only")) for a in command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)  # ${BROKER_CERT_DAYS:-365}: default
    assert done.returncode == 0, done.stderr
    assert [p.name for p in (folder / "ca-only").iterdir()] == ["ca.pem"]  # what workers mount: no key
    assert (folder / "ca-only" / "ca.pem").read_bytes() == (folder / "ca.pem").read_bytes()
    return folder


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _accepts(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


# --- Kafka ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka(
    compose: dict[str, Any], env: dict[str, str], certs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, int]]:
    """kafka1 of the compose file as one node on loopback: its start script, its settings. Yields the port map."""
    home = tmp_path_factory.mktemp("kafka1")
    ports = dict(zip(KAFKA_PORTS, free_ports(len(KAFKA_PORTS)), strict=True))
    mapping = {f":{old}": f":{new}" for old, new in ports.items()} | {CERTS: str(certs)}
    settings = compose["configs"]["kafka-server"]["content"]
    settings = settings.replace("1@kafka1:9093,2@kafka2:9093,3@kafka3:9093", "1@localhost:9093")
    settings = re.sub(r"(replication\.factor|min\.isr)=\d+", r"\1=1", settings)  # one node
    settings = settings.replace("log.dirs=/var/lib/kafka/data", f"log.dirs={home / 'data'}")
    (home / "kafka-server.properties").write_text(rewrite(settings, mapping))
    (home / "kafka-server.properties").chmod(0o444)  # as compose mounts a config: read-only

    release = release_of(KAFKA_VERSION)
    (home / "log4j2.properties").write_text(_LOG4J2_CONFIG)
    java = [java_binary(), "-Xms256m", "-Xmx512m", "-cp", f"{release.libs}/*"]
    bin_dir = home / "bin"
    bin_dir.mkdir()
    wrappers = {
        "kafka-run-class.sh": java,  # the main class comes as an argument (or inside an @argument file)
        "kafka-server-start.sh": [*java, f"-Dlog4j2.configurationFile={home / 'log4j2.properties'}", "kafka.Kafka"],
    }
    for name, argv in wrappers.items():  # the image's scripts, reduced to the java call they make
        (bin_dir / name).write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in argv) + ' "$@"\n')
        (bin_dir / name).chmod(0o755)

    service = compose["services"]["kafka1"]
    script = cc.interpolate(service["command"][0], env)  # `$$x` → `$x`, as compose hands it to the container
    script = rewrite(
        script,
        {
            "/etc/sixnines/kafka-server.properties": str(home / "kafka-server.properties"),
            "/opt/kafka/config/server.properties": str(home / "server.properties"),
            "/opt/kafka/bin/": f"{bin_dir}/",
            "/tmp/kafka-format.args": str(home / "kafka-format.args"),
        },
    )
    assert release.storage_tool in script  # the image's release formats with the class the script names
    node_env = service_env(compose, "kafka1", env)
    node_env["KAFKA_ADVERTISED_LISTENERS"] = rewrite(node_env["KAFKA_ADVERTISED_LISTENERS"], mapping).replace(
        "kafka1", "localhost"
    )
    entrypoint = [str(a) for a in service["entrypoint"]]
    assert entrypoint == ["/bin/bash", "-ec"]
    log = (home / "kafka.log").open("wb")
    proc = subprocess.Popen(
        [shutil.which("bash") or "bash", "-ec", script],
        env={"PATH": os.environ["PATH"], **node_env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + with_patience(120)  # a Kafka start, as bench_tasks waits for one
        while not all(_accepts(ports[p]) for p in (9092, 9094, 9095, 9096)):  # the service's healthcheck
            assert proc.poll() is None, (home / "kafka.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (home / "kafka.log").read_text()[-3000:]
            time.sleep(0.5)
        yield ports
    finally:
        stop(proc)
        log.close()


def kafka_connection(compose: dict[str, Any], env: dict[str, str], ports: dict[int, int], certs: Path) -> str:
    """AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL as compose sets it, pointed at the one local node."""
    conn = connection(compose, env, "sixnines_kafka_external")
    extra = conn["extra"]
    local = {f"kafka1:{p}": f"localhost:{ports[p]}" for p in KAFKA_PORTS}
    extra["listeners"] = {k: local[v.split(",")[0]] for k, v in extra["listeners"].items()}
    extra["bootstrap_servers"] = local[extra["bootstrap_servers"].split(",")[0]]
    extra["ssl_ca_location"] = extra["ssl_ca_location"].replace(CERTS, str(certs))
    return json.dumps(conn)


def external_cell(system: str, conn_id: str, broker: dict[str, Any], client: dict[str, Any]) -> Cell:
    raw = {
        "name": "composetls",
        "systems": [
            {"system": system, "brokers": "external", "connection": conn_id, "broker": broker, "client": client}
        ],
        "workload": {**SHORT, "drain_timeout_s": 5},
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "composetls"))
    return cell


@pytest.mark.parametrize(
    ("security", "mechanism"),
    [
        ("plaintext", None),
        ("ssl", None),
        ("sasl_plaintext", "SCRAM-SHA-256"),
        ("sasl_ssl", None),  # the connection's mechanism: SCRAM-SHA-512
    ],
)
def test_kafka_route_through_the_compose_connection(
    security: str,
    mechanism: str | None,
    compose: dict[str, Any],
    env: dict[str, str],
    kafka: dict[int, int],
    certs: Path,
    tmp_path: Path,
    console: Console,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL", kafka_connection(compose, env, kafka, certs))
    client = {"security": security, "producer": {"acks": "all"}} | ({"sasl_mechanism": mechanism} if mechanism else {})
    cell = external_cell("kafka", "sixnines_kafka_external", {"partitions": 1, "replication_factor": 1}, client)

    report = run_cell(cell, Lake(tmp_path / "lake"), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.acknowledged == acc.received == 200 and acc.lost == 0
    access = json.loads((report.path / "result.json").read_text())["context"]["broker"]["access"]
    assert access["security_protocol"] == security.upper()
    compose_port = {"plaintext": 9092, "ssl": 9094, "sasl_plaintext": 9095, "sasl_ssl": 9096}[security]
    assert access["bootstrap_servers"] == f"localhost:{kafka[compose_port]}"  # the listener of that protocol
    if security.startswith("sasl"):
        assert access["sasl_mechanism"] == (mechanism or "SCRAM-SHA-512") and access["sasl_username"] == "sixnines"
    if security.endswith("ssl"):
        assert access["ssl_ca_location"] == str(certs / "ca.pem")


def test_kafka_refuses_a_wrong_scram_password(
    compose: dict[str, Any], env: dict[str, str], kafka: dict[int, int], certs: Path
) -> None:
    conn = parse_connection("probe", kafka_connection(compose, env, kafka, certs))
    good = kafka_access(conn, "sasl_ssl", "SCRAM-SHA-256")
    admin = admin_client(good.address, good.client)
    assert admin.list_topics(timeout=20).brokers  # the user made at format time logs in over SASL_SSL/SCRAM-SHA-256
    errors: list[KafkaError] = []  # librdkafka reports the refusal through error_cb; the call only times out
    bad = AdminClient(
        {"bootstrap.servers": good.address, **good.client, "sasl.password": "wrong", "error_cb": errors.append}
    )
    with pytest.raises(KafkaException):  # it can never answer, so it is not waited for long (10 s cost 9 s)
        bad.list_topics(timeout=1)
    deadline = time.monotonic() + 20  # the refusal is reported whenever the login is refused, on any host
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors) and time.monotonic() < deadline:
        bad.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


# --- NATS ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nats(
    compose: dict[str, Any], env: dict[str, str], certs: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """nats1 of the compose file as one server: its config, its flags (cluster flags dropped). Yields the port."""
    from bench_tasks.brokers.ports import free_port
    from bench_tasks.systems.nats.release import bundled_version, server_binary

    home = tmp_path_factory.mktemp("nats1")
    port, http = free_port(), free_port()
    conf = cc.interpolate(compose["configs"]["nats-server"]["content"], env).replace(CERTS, str(certs))
    (home / "nats-server.conf").write_text(conf)
    flags: dict[str, str | None] = {}  # the node's flags: `--name value`, or a switch such as `--jetstream`
    words = [str(a) for a in compose["services"]["nats1"]["command"]]
    for i, word in enumerate(words):
        if word.startswith("--"):
            has_value = i + 1 < len(words) and not words[i + 1].startswith("--")
            flags[word] = words[i + 1] if has_value else None
    assert flags["--config"] == "/etc/sixnines/nats-server.conf" and "--jetstream" in flags
    for cluster_flag in ("--cluster_name", "--cluster", "--routes"):  # one server here
        del flags[cluster_flag]
    flags |= {
        "--config": str(home / "nats-server.conf"),
        "--client_advertise": f"localhost:{port}",
        "--store_dir": str(home / "data"),
        "--http_port": str(http),
        "--addr": "127.0.0.1",
        "--port": str(port),
    }
    args = [a for flag, value in flags.items() for a in (flag, value) if a is not None]
    argv = [str(server_binary(bundled_version())), *args]
    log = (home / "nats.log").open("wb")
    node_env = service_env(compose, "nats1", env)
    proc = subprocess.Popen(argv, env={"PATH": os.environ["PATH"], **node_env}, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not _accepts(port):
            assert proc.poll() is None and time.monotonic() < deadline, (home / "nats.log").read_text()[-3000:]
            time.sleep(0.2)
        yield port
    finally:
        stop(proc)
        log.close()


def nats_connection(compose: dict[str, Any], env: dict[str, str], port: int, certs: Path) -> dict[str, Any]:
    conn = connection(compose, env, "sixnines_nats_external")
    conn["extra"]["servers"] = f"tls://localhost:{port}"
    conn["extra"]["tls_ca_file"] = conn["extra"]["tls_ca_file"].replace(CERTS, str(certs))
    return conn


def test_nats_jetstream_over_tls_with_the_compose_user(
    compose: dict[str, Any],
    env: dict[str, str],
    nats: int,
    certs: Path,
    tmp_path: Path,
    console: Console,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL", json.dumps(nats_connection(compose, env, nats, certs)))
    cell = external_cell("nats", "sixnines_nats_external", {"mode": "jetstream", "storage": "file"}, {})

    report = run_cell(cell, Lake(tmp_path / "lake"), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    assert report.analysis.accounting.received == report.analysis.accounting.scheduled == 200
    broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert broker["server_info"]["tls_required"] is True and broker["access"]["auth"] == "user/password"
    assert broker["access"]["user"] == "sixnines" and env["NATS_PASSWORD"] not in json.dumps(broker)


def test_nats_refuses_plaintext_and_a_wrong_password(
    compose: dict[str, Any], env: dict[str, str], nats: int, certs: Path
) -> None:
    import ssl

    import nats as nats_py

    conn = nats_connection(compose, env, nats, certs)
    tls = ssl.create_default_context(cafile=conn["extra"]["tls_ca_file"])

    async def attempt(**kwargs: Any) -> str:
        options = {"allow_reconnect": False, "max_reconnect_attempts": 0, "connect_timeout": 5} | kwargs
        try:
            client = await nats_py.connect(**options)
        except Exception as exc:  # what nats-py raises differs by failure; the message tells which
            return f"refused: {type(exc).__name__} {exc}"
        await client.close()
        return "connected"

    user, password = conn["login"], conn["password"]
    url = f"tls://localhost:{nats}"
    assert asyncio.run(attempt(servers=[url], tls=tls, user=user, password=password)) == "connected"
    assert asyncio.run(attempt(servers=[url], tls=tls, user=user, password="wrong")).startswith("refused")
    assert asyncio.run(attempt(servers=[f"nats://localhost:{nats}"], user=user, password=password)).startswith(
        "refused"
    )


def _routes(monitor_port: int) -> set[str]:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{monitor_port}/routez", timeout=2) as resp:
            return {r.get("remote_name") for r in json.loads(resp.read()).get("routes") or []}
    except OSError:
        return set()


def test_nats_routes_admit_only_nodes_with_the_deployments_certificate(
    compose: dict[str, Any], env: dict[str, str], certs: Path, tmp_path: Path
) -> None:
    """Two nodes on the compose `nats-server` config form a cluster over TLS routes; a node routing in plain
    text, and one with a certificate of another CA, are refused by both."""
    from bench_tasks.brokers.tls import make_tls
    from bench_tasks.systems.nats.release import bundled_version, server_binary

    conf = cc.interpolate(compose["configs"]["nats-server"]["content"], env).replace(CERTS, str(certs))
    (tmp_path / "deployment.conf").write_text(conf)
    other = make_tls(tmp_path / "other-ca", ("localhost", "127.0.0.1"))
    (tmp_path / "other.conf").write_text(
        conf.replace(str(certs / "server-cert.pem"), str(other.server_cert))
        .replace(str(certs / "server-key.pem"), str(other.server_key))
        .replace(str(certs / "ca.pem"), str(other.ca_cert))
    )
    (tmp_path / "plain.conf").write_text("")
    client, cluster, monitor = (free_ports(4) for _ in range(3))
    routes = ",".join(f"nats://localhost:{port}" for port in cluster[:2])
    node_env = {"PATH": os.environ["PATH"], **service_env(compose, "nats1", env)}
    procs = []
    for i, conf_name in enumerate(("deployment", "deployment", "plain", "other")):
        argv = [
            str(server_binary(bundled_version())),
            "--config",
            str(tmp_path / f"{conf_name}.conf"),
            "--name",
            f"n{i}",
            "--addr",
            "127.0.0.1",
            "--port",
            str(client[i]),
            "--http_port",
            str(monitor[i]),
            "--cluster_name",
            "sixnines",
            "--cluster",
            f"nats://127.0.0.1:{cluster[i]}",
            "--routes",
            routes,
        ]
        log = (tmp_path / f"n{i}.log").open("wb")
        procs.append(subprocess.Popen(argv, env=node_env, stdout=log, stderr=subprocess.STDOUT))
    try:
        deadline = time.monotonic() + 30
        while _routes(monitor[0]) != {"n1"} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _routes(monitor[0]) == {"n1"}, (tmp_path / "n0.log").read_text()[-2000:]
        time.sleep(3)  # the strangers have retried by now
        assert _routes(monitor[0]) == {"n1"} and _routes(monitor[1]) == {"n0"}
        assert _routes(monitor[2]) == set() and _routes(monitor[3]) == set()
        refused = (tmp_path / "n0.log").read_text() + (tmp_path / "n1.log").read_text()
        assert "TLS route handshake error" in refused, refused[-2000:]
    finally:
        for proc in procs:
            stop(proc)
