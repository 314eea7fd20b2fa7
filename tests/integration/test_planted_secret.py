"""One secret planted everywhere a user can put one, then looked for everywhere sixnines writes or shows.

A random secret is each system's server password and client password (Redis, RabbitMQ, NATS Streaming, NATS and
Kafka, the last through an imported OMB driver file whose JAAS line and truststore password hold it too), and it is
quoted by a setting that makes one Redis cell fail to start. Every cell runs on real brokers through Airflow's
steps (provision, the detached generator, land, teardown), the run's report is built, the run is exported as OMB
results and `.hgrm` files, the failed cell's notification is sent to a webhook, and the sweep DAG of the matrix is
built as Airflow shows it. The cells that set a password land `ok`; the secret is in no record, output, log or
console line, and only in files that are private to their owner (the brokers' own configs, the cell's secrets).
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import secrets
import stat
import subprocess
import sys
import threading
import types
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pyarrow.parquet as pq
import pytest
import yaml

from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import PHASES, CellWork
from bench_tasks.lake.layout import RunInfo
from bench_tasks.report import build_run_report
from bench_tasks.spec.matrix import load_matrix

pytestmark = pytest.mark.usefixtures("no_orphans")
REPO = Path(__file__).resolve().parents[2]
SECRET = "planted-" + secrets.token_hex(8)
WORKLOAD = """\
name: planted
topics: 1
partitionsPerTopic: 1
keyDistributor: NO_KEY
messageSize: 256
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 300
consumerBacklogSizeGB: 0
testDurationMinutes: 1
"""
KAFKA_DRIVER = f"""\
name: Kafka
driverClass: io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver
replicationFactor: 1
commonConfig: |
  bootstrap.servers=localhost:9092
  sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="{SECRET}";
  ssl.truststore.password={SECRET}
producerConfig: |
  acks=1
  sasl.password={SECRET}
"""
PHASE_S = {"warmup_s": 1, "measure_s": 1, "cooldown_s": 0.5}
DAG_ID, DAG_RUN = "sixnines_planted", "manual__planted"


def sixnines(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SIXNINES_LAKE"}
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, timeout=300, env=env
    )


def planted_matrix(folder: Path) -> tuple[Path, list[str]]:
    """The OMB import's Kafka matrix with every other system beside it, each given the secret (its last block
    fails: a setting quotes the secret); the import's own output goes with what is searched."""
    (folder / "workload.yaml").write_text(WORKLOAD)
    (folder / "kafka.yaml").write_text(KAFKA_DRIVER)
    imported_path = folder / "imported.yaml"
    done = sixnines("import", "omb", str(folder / "workload.yaml"), "--driver", str(folder / "kafka.yaml"),
                    "-o", str(imported_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    raw = yaml.safe_load(imported_path.read_text())
    kafka = raw["systems"][0]
    kafka["broker"].setdefault("server", {})["ssl.key.password"] = SECRET  # a PLAINTEXT listener ignores it
    kafka.setdefault("client", {}).setdefault("producer", {})["sasl.password"] = SECRET
    login = {"user": "bench", "password": SECRET}
    raw["systems"] += [
        {"system": "redis", "broker": {"server": {"requirepass": SECRET}}, "client": {"connect": {"password": SECRET}}},
        {"system": "rabbitmq", "broker": {"server": {"default_user": "bench", "default_pass": SECRET}}},
        {"system": "stan", "broker": {"server": {"authorization": login}}, "client": {"connect": login}},
        {
            "system": "nats",
            "broker": {"mode": "core", "server": {"authorization": login}},
            "client": {"connect": login},
        },
        {"system": "redis", "broker": {"server": {"requirepass": SECRET, "maxmemory": f"1gb {SECRET}"}}},
    ]
    for block in raw["systems"]:
        block["versions"] = ["latest"]
    raw["workload"] |= PHASE_S
    path = folder / "planted.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path, [done.stdout, done.stderr]


class Webhook(http.server.BaseHTTPRequestHandler):
    bodies: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def webhook(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A local webhook as the notification connection; yields what it received."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Webhook)
    Webhook.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    conn = {"conn_type": "http", "host": f"http://127.0.0.1:{server.server_address[1]}/hook"}
    monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_NOTIFY", json.dumps(conn))
    try:
        yield Webhook.bodies
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def airflow_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Airflow's configuration in a throwaway home (unless already read), the plugins importable as Airflow does."""
    if "airflow" not in sys.modules:
        monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow-home"))
    monkeypatch.syspath_prepend(str(REPO / "plugins"))


def task_context(group: str, exception: BaseException | None = None) -> dict[str, Any]:
    """What Airflow hands a cell's task and its callbacks, for this test's one DAG run."""
    dag_run = types.SimpleNamespace(dag_id=DAG_ID, run_id=DAG_RUN, logical_date=datetime.now(UTC), run_after=None)
    ti = types.SimpleNamespace(dag_id=DAG_ID, task_id=f"{group}.land", try_number=1)
    return {"dag_run": dag_run, "ti": ti, "exception": exception}


def run_cell_steps(cell: Any, run: RunInfo, lake: Path, work: CellWork, logged: list[str]) -> dict[str, Any]:
    """Airflow's steps of one cell: provision, the detached generator watched phase by phase, land, teardown."""
    try:
        logged.append(json.dumps(provision_when_free(prepare_cell(cell), run, lake, work)))
        start_generator(work)
        for phase in PHASES:
            logged.append(json.dumps(watch_phase(work, phase, log=logged.append, poll_s=0.2)))
    except Exception as exc:  # a failed provision or phase: land records the cell with its reason
        logged.append(str(exc))
    try:
        return land_step(work)
    finally:
        logged.append(json.dumps(teardown_step(work)))


@pytest.mark.usefixtures("airflow_env")
@pytest.mark.timeout(1200)
def test_a_planted_secret_is_nowhere_but_in_private_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, webhook: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    from sixnines_airflow.notifier import CellFailureNotifier
    from sixnines_airflow.runtime import run_info, work_for
    from sixnines_airflow.sweep import build_sweep_dag

    caplog.set_level(logging.DEBUG)
    lake = tmp_path / "lake"
    monkeypatch.setenv("SIXNINES_LAKE", str(lake))
    source, outputs = planted_matrix(tmp_path)
    matrix = load_matrix(source)
    dag = build_sweep_dag(matrix, source)
    outputs += [dag.doc_md or "", *(json.dumps(t.op_args, default=str) for t in dag.tasks if hasattr(t, "op_args"))]

    run, logged, landed, works = run_info(task_context("c")), [], {}, []
    for index, cell in enumerate(matrix.cells, 1):
        work = work_for(task_context(f"c{index:02d}"))
        works.append(work)
        landed[cell.spec.system + ("-failing" if index == len(matrix.cells) else "")] = run_cell_steps(
            cell, run, lake, work, logged
        )
    failing = works[-1].root.name
    CellFailureNotifier().notify(task_context(failing, RuntimeError(landed["redis-failing"]["reason"])))
    report = build_run_report(lake, run.run_id)
    exported = [
        sixnines("export", kind, "--latest", "--lake", str(lake), "--out", str(tmp_path / "exports" / kind))
        for kind in ("omb", "hgrm")
    ]

    statuses = {name: summary["status"] for name, summary in landed.items()}
    assert statuses == {"kafka": "ok", "redis": "ok", "rabbitmq": "ok", "stan": "ok", "nats": "ok",
                        "redis-failing": "failed"}, landed  # fmt: skip
    assert "maxmemory" in landed["redis-failing"]["reason"] and "<redacted>" in landed["redis-failing"]["reason"]
    assert all(done.returncode == 0 for done in exported), [done.stderr for done in exported]
    assert len(webhook) == 1 and "maxmemory" in webhook[0]  # the failed cell's notification was delivered
    outputs += webhook + logged + [caplog.text] + [done.stdout + done.stderr for done in exported]

    assert [text for text in outputs if SECRET in text] == []
    assert report.exists() and files_holding(lake, SECRET) == []
    assert files_holding(tmp_path / "exports", SECRET) == []
    assert strings_holding(lake, SECRET) == []  # inside compressed Parquet columns too
    holders = [path for work in works for path in files_holding(work.root, SECRET)]
    assert all(private(path) for path in holders), [(p, oct(p.stat().st_mode)) for p in holders]


def files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def strings_holding(lake: Path, secret: str) -> list[str]:
    """Parquet files whose string columns hold the secret (a compressed page hides it from a byte search)."""
    found = []
    for path in lake.rglob("*.parquet"):
        table = pq.read_table(path)
        for name in table.column_names:
            texts = table[name].to_pylist() if str(table.schema.field(name).type) in ("string", "large_string") else []
            if any(secret in value for value in texts if value):
                found.append(f"{path}:{name}")
    return found


def private(path: Path) -> bool:
    """Readable by its owner only, in a folder only its owner can enter."""
    return not (stat.S_IMODE(path.stat().st_mode) & 0o077 or stat.S_IMODE(path.parent.stat().st_mode) & 0o077)
