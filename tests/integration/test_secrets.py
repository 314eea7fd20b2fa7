"""Secrets on real brokers: what the cell records, what lands on disk and what the process table shows.

Each test starts real brokers on loopback and looks where a secret could leak: the recorded context, files
(their mode and folder), process arguments, and the JAAS lines a password with quotes must survive."""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from bench_tasks.brokers.provision import attach
from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.cell.teardown import release_clusters, teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import PHASES, CellWork
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.report import build_run_report
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems.kafka.cluster import KafkaCluster
from bench_tasks.systems.kafka.probe import reported_version
from bench_tasks.systems.kafka.security import ListenerSecurity
from bench_tasks.systems.nats.release import bundled_version
from bench_tasks.systems.nats.server import NatsServer
from bench_tasks.systems.nats.settings import NatsBroker

from .helpers import make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")
NEWEST = newest_kafka()
AWKWARD = 'pa"ss\\wo rd'  # a quote, a backslash and a space: what breaks a hand-quoted JAAS line


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def private(path: Path) -> bool:
    """Readable by its owner only, in a folder only its owner can enter."""
    return not (stat.S_IMODE(path.stat().st_mode) & 0o077 or stat.S_IMODE(path.parent.stat().st_mode) & 0o077)


class ArgumentWatch:
    """Every process's command line, read every few milliseconds while the test runs: whatever held a password or
    a SCRAM user is kept (a format tool lives about a second, far longer than one pass)."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.is_set():
            for proc in psutil.process_iter(["cmdline"]):
                line = " ".join(proc.info["cmdline"] or ())
                if "password" in line.lower() or "--add-scram" in line:
                    self.seen[proc.pid] = line
            self.passes += 1
            self._stop.wait(0.005)

    def holding(self, secret: str) -> list[str]:
        return [line for line in self.seen.values() if secret in line or "--add-scram" in line]

    def __enter__(self) -> ArgumentWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def argument_watch() -> Iterator[ArgumentWatch]:
    with ArgumentWatch() as watch:
        yield watch


@pytest.mark.timeout(600)
def test_a_sasl_cell_keeps_its_password_in_private_files_only(tmp_path: Path) -> None:
    """A provisioned SASL_SSL/SCRAM cluster through Airflow's steps, kept for reuse: the throw-away password is
    in no state file (state.json, clusters/<key>.json) and in no file anyone but its owner can read; the
    generator still logs in with it; once the run releases the cluster, it is in no file at all."""
    client = {"security": "sasl_ssl", "sasl_mechanism": "SCRAM-SHA-512", "producer": {"acks": "all"}}
    cell = prepare_cell(
        make_cell("e2e", system="kafka", version=NEWEST, broker={"brokers": 1}, client=client, warmup_s=1)
    )
    run, work, lake, clusters = RunInfo.new(), CellWork(tmp_path / "work"), tmp_path / "lake", tmp_path / "clusters"

    provision_when_free(cell, run, lake, work, policy="reuse", clusters=clusters)
    try:
        state = work.read(work.state)
        assert state is not None
        password = attach(state["brokers"]).target().client["sasl.password"]  # what the generator gets
        assert len(password) >= 16
        (entry,) = clusters.glob("*.json")
        assert password not in work.state.read_text() and password not in entry.read_text()
        holders = files_holding(tmp_path, password)
        assert holders and all(private(p) for p in holders), [(p, oct(p.stat().st_mode)) for p in holders]

        start_generator(work)
        for phase in PHASES:
            watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
        landed = land_step(work)
        assert landed["status"] == "ok", landed["reason"]
        assert teardown_step(work)["kept"]  # kept on purpose, for the next cell of this broker spec
        assert release_clusters(clusters)
    finally:  # whatever failed above: the detached cluster does not outlive the test
        with contextlib.suppress(Exception):
            teardown_step(work, keep_reused=False)
        with contextlib.suppress(Exception):
            release_clusters(clusters)
    assert files_holding(tmp_path, password) == []  # the run's work folders went with the cluster


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
@pytest.mark.timeout(300)
def test_scram_users_are_made_without_a_password_in_any_process_argument(
    tmp_path: Path, argument_watch: ArgumentWatch
) -> None:
    """The storage tool learns the SCRAM users at format time from a private argument file, not from its
    command line, which every user of the host can read in the process table."""
    cluster = KafkaCluster(NEWEST, 1, {}, tmp_path / "kafka", security="sasl_plaintext", sasl_mechanism="SCRAM-SHA-256")
    with cluster:  # ready means the client user logged in over SCRAM: the users were made
        password = cluster.client_config["sasl.password"]
        format_log = (tmp_path / "kafka" / "node-1" / "format.log").read_text()
    assert "Formatting" in format_log, format_log
    assert argument_watch.passes > 10, "the watch hardly looked"
    assert argument_watch.holding(password) == [], argument_watch.holding(password)
    assert not any(p.name.endswith(".args") for p in (tmp_path / "kafka").rglob("*")), "argument file left behind"


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
def test_nats_passthrough_secrets_are_not_recorded(tmp_path: Path) -> None:
    """A matrix may pass nats-server an authorization block; the server gets it, the record does not."""
    broker = NatsBroker(server={"authorization": {"user": "u", "password": "hunter2"}, "max_payload": 2097152})
    with NatsServer(bundled_version(), broker, tmp_path / "nats") as server:
        assert server.endpoint is not None
        recorded = server.endpoint.config
    assert "hunter2" not in recorded and "<redacted>" in recorded and "2097152" in recorded
    assert "hunter2" in (tmp_path / "nats" / "nats-server.conf").read_text()  # what the server runs with


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
@pytest.mark.timeout(400)
def test_a_sasl_password_with_quotes_survives_the_jaas_lines(tmp_path: Path) -> None:
    """PLAIN users live in the broker's JAAS line and the Java tools log in with one: a password holding a quote
    and a backslash must reach both intact (librdkafka, which needs no JAAS, logs in with it too)."""
    cluster = KafkaCluster(NEWEST, 1, {}, tmp_path / "kafka", security="sasl_plaintext", sasl_mechanism="PLAIN")
    cluster.security = ListenerSecurity("SASL_PLAINTEXT", "PLAIN", client_password=AWKWARD)
    with cluster:  # start() waits for librdkafka to log in as the client user: the broker parsed the password
        assert cluster.endpoint is not None
        client = cluster.client_config
        assert client["sasl.password"] == AWKWARD
        reported = reported_version(cluster.endpoint.bootstrap_servers, client, timeout_s=120)  # the Java client
        properties = json.dumps([n.server_properties for n in cluster.endpoint.nodes])
    assert reported["version"] == ".".join(NEWEST.split(".")[:2])
    assert AWKWARD not in properties and "<redacted>" in properties


@pytest.fixture
def nats_with_url_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A nats-server requiring a user and password, and a connection that carries both in its server URL."""
    password = "url-secret-" + secrets.token_urlsafe(8)
    broker = NatsBroker(server={"authorization": {"user": "bench", "password": password}})
    with NatsServer(bundled_version(), broker, tmp_path / "nats") as server:
        assert server.endpoint is not None
        url = server.endpoint.url.replace("nats://", f"nats://bench:{password}@")
        conn = {"conn_type": "nats", "extra": {"servers": url}}
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NATS_URL", json.dumps(conn))
        yield password


def test_a_nats_url_with_credentials_reaches_no_record_log_or_report(
    tmp_path: Path, nats_with_url_credentials: str, caplog: pytest.LogCaptureFixture
) -> None:
    """`nats://user:password@host` in a connection: the cell logs in with it, and neither the lake, the report,
    the console, the logs, the work folder nor what provision hands to Airflow (XCom) ever shows it."""
    password = nats_with_url_credentials
    caplog.set_level(logging.DEBUG)
    raw = {
        "name": "urlcreds",
        "systems": [{"system": "nats", "brokers": "external", "connection": "sixnines_nats_url"}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 200, "warmup_s": 1, "measure_s": 1, "cooldown_s": 1},
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "urlcreds"))
    lake = tmp_path / "lake"
    console = Console(record=True, width=200)
    report = run_cell(cell, Lake(lake), RunInfo.new(), console)  # the CLI's way
    assert report.status == "ok", report.reason
    broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert broker["access"]["auth"] == "user/password" and broker["access"]["user"] == "bench"

    run, work = RunInfo.new(), CellWork(tmp_path / "work")  # Airflow's way
    info = provision_when_free(cell, run, lake, work)
    start_generator(work)
    for phase in PHASES:
        watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
    assert land_step(work)["status"] == "ok"
    teardown_step(work)
    page = build_run_report(lake, run.run_id).read_text()

    assert password not in json.dumps(info) and password not in page
    assert password not in console.export_text() and password not in caplog.text
    assert files_holding(lake, password) == [] and files_holding(work.root, password) == []
