"""External brokers and Kafka security, against real brokers on 127.0.0.1 that the *test* starts: a SASL_SSL KRaft
broker and a TLS + user/password nats-server, each reached only through an `AIRFLOW_CONN_…` variable; and a
provisioned Kafka cell whose listener speaks SASL_SSL. Short cells (2 s measure, low rate)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench_tasks.brokers.tls import make_tls
from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.lifecycle import land_step, provision_when_free
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import PHASES, CellWork
from bench_tasks.errors import BrokerError
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import Cell, parse_matrix
from bench_tasks.systems.kafka.admin import admin_client
from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.nats.server import NatsServer
from bench_tasks.systems.nats.settings import NatsBroker

from .helpers import make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")
NEWEST = newest_kafka()
SHORT = {"message_size_bytes": 256, "rate_per_s": 200, "warmup_s": 1, "measure_s": 1, "cooldown_s": 0.5}


def external_cell(system: str, connection: str, broker: dict[str, Any], client: dict[str, Any] | None = None) -> Cell:
    raw = {
        "name": "ext",
        "systems": [
            {
                "system": system,
                "brokers": "external",
                "connection": connection,
                "broker": broker,
                "client": client or {},
            }
        ],
        "workload": {**SHORT, "drain_timeout_s": 5},
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "ext"))
    return cell


def lake_text(root: Path) -> str:
    """Every text-like file the run wrote to the lake, to prove no secret reached it."""
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.suffix in (".json", ".log"))


# --- (a) an external Kafka broker over SASL_SSL/SCRAM, via AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL ---------------------


def test_external_kafka_sasl_ssl_cell_creates_and_deletes_its_topic_only(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = KafkaCluster(NEWEST, 1, {}, tmp_path / "kafka", security="sasl_ssl", sasl_mechanism="SCRAM-SHA-512")
    with cluster:
        node = cluster.processes[1]
        pid, client = node.pid, cluster.client_config
        port = cluster.endpoint.nodes[0].port if cluster.endpoint else 0
        conn = {
            "conn_type": "kafka",
            "host": "127.0.0.1",
            "port": port,
            "login": client["sasl.username"],
            "password": client["sasl.password"],
            "extra": {
                "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512",
                "ssl_ca_location": client["ssl.ca.location"],
            },
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL", json.dumps(conn))
        cell = external_cell("kafka", "sixnines_kafka_external", {"partitions": 2}, {"producer": {"acks": "all"}})
        admin = admin_client(f"127.0.0.1:{port}", client)
        before = set(admin.list_topics(timeout=10).topics)

        report = run_cell(cell, Lake(tmp_path / "lake"), RunInfo.new(), console)

        assert report.status == "ok", report.reason
        acc = report.analysis.accounting
        assert acc.scheduled == acc.received == acc.acknowledged == 200 and acc.lost == 0
        assert node.alive() and node.pid == pid  # the cell neither started nor stopped a broker
        after = {t for t in admin.list_topics(timeout=10).topics if not t.startswith("__")}  # not Kafka's own
        assert after == before  # its topic was created (auto-creation is off, yet 400 arrived) and deleted again
        assert admin.list_consumer_groups().result(timeout=20).valid == []  # and its consumer group too
        result = json.loads((report.path / "result.json").read_text())
        broker = result["context"]["broker"]
        assert broker["brokers"] == "external" and broker["version"] == NEWEST.rsplit(".", 1)[0]
        assert "FeatureCommand" in broker["version_source"] and broker["metadata_version"]["FinalizedVersionLevel"]
        assert broker["access"]["security_protocol"] == "SASL_SSL" and broker["access"]["sasl_username"] == "sixnines"
        assert broker["routes"] == [f"sixnines-{broker['names']}"] and broker["routes"][0] not in before
        assert "pid" not in json.dumps(broker) and result["spec"]["connection"] == "sixnines_kafka_external"
        assert client["sasl.password"] not in lake_text(tmp_path / "lake")


# --- (b) an external nats-server with TLS and a user, via AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL, through Airflow's steps


@pytest.fixture
def nats_external(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A JetStream nats-server requiring TLS (our CA) and a user/password, and the connection that reaches it."""
    tls = make_tls(tmp_path / "tls")
    password = secrets.token_urlsafe(12)
    server = {
        "tls": {"cert_file": str(tls.server_cert), "key_file": str(tls.server_key)},
        "authorization": {"user": "bench", "password": password},
    }
    from bench_tasks.systems.nats.release import bundled_version

    nats = NatsServer(bundled_version(), NatsBroker(mode="jetstream", server=server), tmp_path / "nats")
    endpoint = nats.start()
    host, port = endpoint.url.removeprefix("nats://").split(":")
    conn = {"conn_type": "nats", "host": host, "port": int(port), "login": "bench", "password": password}
    conn["extra"] = {"tls_ca_file": str(tls.ca_cert)}
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NATS_EXTERNAL", json.dumps(conn))
    try:
        yield nats, password
    finally:
        nats.stop()


def _streams(cell: Cell) -> list[str]:
    from bench_tasks.brokers.connections import get_connection
    from bench_tasks.systems import system_of
    from bench_tasks.systems.nats.client import connect

    access = system_of(cell.spec).client_access(get_connection(cell.spec.connection), cell.spec)

    async def names() -> list[str]:
        nc = await connect(access.address, cell.spec, "probe", access.client)  # type: ignore[arg-type]
        try:
            return [s.config.name for s in await nc.jetstream().streams_info()]
        finally:
            await nc.close()

    return asyncio.run(names())


def test_external_nats_jetstream_through_the_airflow_steps(tmp_path: Path, nats_external: Any) -> None:
    nats, password = nats_external
    pid = nats.process.pid
    cell = external_cell("nats", "sixnines_nats_external", {"mode": "jetstream", "storage": "memory"})
    run, work, lake = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake"

    info = provision_when_free(cell, run, lake, work)
    state = work.read(work.state)
    assert state is not None and state["brokers"]["kind"] == "external" and password not in json.dumps(state)
    (stream,) = state["brokers"]["context"]["routes"]
    assert _streams(cell) == [stream] and info["cell_id"] == cell.id
    start_generator(work)  # hands the connection to the generator in its environment, never in a file
    for phase in PHASES:
        watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
    landed = land_step(work)
    assert landed["status"] == "ok", landed["reason"]
    report = teardown_step(work)

    assert report["deleted_routes"] == [stream] and report["stopped"] == [] and _streams(cell) == []
    assert nats.process.alive() and nats.process.pid == pid  # the server was only used, never stopped
    result = json.loads((Path(landed["path"]) / "result.json").read_text())
    broker = result["context"]["broker"]
    assert broker["version"] == nats.endpoint.version and "INFO" in broker["version_source"]
    assert broker["server_info"]["tls_required"] is True and broker["access"]["auth"] == "user/password"
    assert result["accounting"]["received"] == result["accounting"]["scheduled"] == 200
    assert password not in lake_text(lake)


def test_external_stream_is_deleted_when_the_cell_fails_before_load(tmp_path: Path, nats_external: Any) -> None:
    cell = external_cell("nats", "sixnines_nats_external", {"mode": "jetstream"})
    run, work = RunInfo.new(), CellWork(tmp_path / "work")
    provision_when_free(cell, run, tmp_path / "lake", work)
    assert len(_streams(cell)) == 1
    report = teardown_step(work)  # no generator ever ran: teardown still removes what provision made
    assert len(report["deleted_routes"]) == 1 and _streams(cell) == []
    with pytest.raises(BrokerError, match="need provisioned brokers"):
        provision_when_free(
            cell, run, tmp_path / "lake", CellWork(tmp_path / "w2"), faults=[{"kind": "stall", "at_s": 1}]
        )


@pytest.mark.alongside
def test_an_external_broker_that_stops_answering_is_seen_by_the_watch(
    tmp_path: Path, nats_external: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generator's broker watch of an external cell probes the connection's endpoint: the server stopping is a
    finding (which fails a cell, as tests/integration/test_undeclared_faults.py shows for a provisioned one)."""
    from bench_tasks.brokers.external import ExternalBrokers
    from bench_tasks.cell import brokerwatch

    monkeypatch.setattr(brokerwatch, "PROBE_EVERY_S", 0.1)
    nats, _ = nats_external
    cell = external_cell("nats", "sixnines_nats_external", {"mode": "jetstream"})
    watch = brokerwatch.watch_for(ExternalBrokers.for_run(cell, "run", tmp_path / "work"))
    port = int(nats.endpoint.url.rsplit(":", 1)[1])
    assert isinstance(watch, brokerwatch.EndpointWatch) and watch.endpoints == [("127.0.0.1", port)]
    watch.start(time.monotonic_ns)
    try:
        time.sleep(0.4)
        assert watch.findings() == []
        nats.stop()
        deadline = time.monotonic() + 5
        while not watch.findings() and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        watch.stop()
    (found,) = watch.findings()
    assert found.what.startswith(f"external broker 127.0.0.1:{port} stopped accepting connections")


# --- (c) a provisioned cluster whose listener speaks SASL_SSL (PLAIN): the security axis ------------------------------


def test_provisioned_sasl_ssl_cell_runs_and_records_its_security(tmp_path: Path, console: Console) -> None:
    cell = make_cell(
        "e2e",
        system="kafka",
        version=NEWEST,
        broker={"brokers": 1},
        client={"security": "sasl_ssl", "sasl_mechanism": "PLAIN", "producer": {"acks": "all"}},
        **{**SHORT, "warmup_s": 3},
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    assert report.analysis.accounting.received == report.analysis.accounting.scheduled == 200
    result = json.loads((report.path / "result.json").read_text())
    security = result["context"]["broker"]["security"]
    assert security["protocol"] == "SASL_SSL" and security["sasl_mechanism"] == "PLAIN"
    assert security["inter_broker"] == "same listener (SASL_SSL)" and "cryptography" in security["tls"]
    properties = result["context"]["broker"]["nodes"][0]["server_properties"]
    assert "CLIENT:SASL_SSL" in properties and "sasl.jaas.config=<redacted>" in properties
    assert "password=" not in lake_text(tmp_path).replace("password=<redacted>", "")
    assert result["spec"]["client"]["security"] == "sasl_ssl"
