"""Kafka's Java client through the JVM worker (`client: {library: java}`), against real Kafka on 127.0.0.1: e2e,
publish and two-hop chain cells landed with every message accounted for; a paused Java worker failing its cell by
name; and librdkafka beside the Java client on one broker in one run, over SASL/SCRAM, the password in no record."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.load.external import ExternalWorker
from bench_tasks.spec.matrix import Cell, parse_matrix
from bench_tasks.systems.kafka.cluster import KafkaCluster

from .helpers import assert_every_send_acknowledged, make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")
NEWEST = newest_kafka()
RATE, MEASURE_S, WARMUP_S, COOLDOWN_S = 500, 2, 2, 1
PHASES = {"warmup_s": WARMUP_S, "measure_s": MEASURE_S, "cooldown_s": COOLDOWN_S, "drain_timeout_s": 5}
# The node on one CPU, the workers on the other (as test_kafka_cells.py does: these tests judge accounting).
APART = {"broker": [0], "producers": [1], "receivers": [1]}
CHAIN_RATE, CHAIN_WARMUP_S = 50, 5
JAVA = {"library": "java", "producer": {"acks": "all", "linger.ms": 1}}


def java_cell(measurement: str = "e2e", broker: dict[str, Any] | None = None, **workload: Any) -> Cell:
    shape = {"rate_per_s": RATE, "cpus": APART, **PHASES, **workload}
    return make_cell(measurement, broker or {"partitions": 2}, "kafka", NEWEST, client=JAVA, **shape)


def test_e2e_cell_lands_every_message(tmp_path: Path, console: Console) -> None:
    report = run_cell(java_cell(), Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == RATE * MEASURE_S
    assert acc.lost == acc.duplicated == 0
    sent = pq.read_table(report.path / "sent-p0.parquet").to_pylist()
    assert all(r["sent_ns"] < r["acked_ns"] and r["offset"] >= 0 and r["partition"] in (0, 1) for r in sent)
    received = pq.read_table(report.path / "received-c0.parquet")
    assert received.num_rows == RATE * (WARMUP_S + MEASURE_S + COOLDOWN_S)  # every message once, every phase
    assert set(received["partition"].to_pylist()) == {0, 1}
    facts = json.loads((report.path / "result.json").read_text())["harness"]["workers"]
    client = facts["producer p0"]["program"]["client"]
    assert client["library"] == "kafka-clients" and client["version"] == NEWEST
    assert client["producer"] == {"acks": "all", "linger.ms": "1"}  # the matrix's properties, as the client got them
    assert facts["consumer c0"]["runtime"] == "jvm" and facts["consumer c0"]["client_errors"]["count"] == 0
    assert "pauses" in facts["consumer c0"] and facts["consumer c0"]["samples"] >= 3


def test_publish_cell_times_the_delivery_callback(tmp_path: Path, console: Console) -> None:
    report = run_cell(java_cell("publish"), Lake(tmp_path), RunInfo.new(), console)

    assert_every_send_acknowledged(report, RATE * MEASURE_S)


def test_two_hop_chain_cell_lands_every_message_on_both_hops(tmp_path: Path, console: Console) -> None:
    """Seed 002's microservice on Kafka: producer -> topic -> Java relay (in the measured topic's group) -> hop 2's
    topic -> consumer (in hop 2's group), every message measured from its original intended time."""
    # Four JVMs (producer, relay, consumer, the broker) on two shared cores, unpinned, at a rate low enough that
    # their wake-ups are few: each thread's wait for a CPU (about 1-2 ms a wake-up on this host while other work
    # runs) stays under the starvation verdict's 10 % of the measure phase. 200/s failed it, as it should. A longer
    # warmup, for the three JVMs' JIT compilers: after 2 s they still ran in the measure phase, and the message
    # threads waited for a CPU 7-10 % of it on an otherwise idle host; after 5 s, 4-5 % (three runs each).
    shape = {"cpus": {}, "rate_per_s": CHAIN_RATE, "warmup_s": CHAIN_WARMUP_S}
    report = run_cell(java_cell("chain", **shape), Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.relayed == acc.received == CHAIN_RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    relayed = pq.read_table(report.path / "relayed-r0.parquet")
    final = pq.read_table(report.path / "received-c0.parquet")
    assert set(relayed["hop"].to_pylist()) == {1} and set(final["hop"].to_pylist()) == {2}
    assert relayed.num_rows == final.num_rows == CHAIN_RATE * (CHAIN_WARMUP_S + MEASURE_S + COOLDOWN_S)
    rows = final.to_pylist()
    assert all(r["sent_ns"] < r["relay_received_ns"] < r["relay_sent_ns"] < r["received_ns"] for r in rows)


def test_a_paused_java_consumer_fails_its_cell_and_is_named(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGSTOP the consumer's JVM for 1.5 s in the measure phase: Kafka keeps every message, the harness could
    not take them, so the cell fails as harness saturation naming the consumer, never as Kafka's latency."""
    original = ExternalWorker.begin

    def begin(self: ExternalWorker, t0_ns: int) -> None:
        original(self, t0_ns)
        if self.name == "consumer-0":
            at_s = (t0_ns - time.monotonic_ns()) / 1e9 + WARMUP_S + 0.3
            threading.Timer(max(0.0, at_s), _stall, (self.pid, 1.5)).start()

    monkeypatch.setattr(ExternalWorker, "begin", begin)
    report = run_cell(java_cell(measure_s=3), Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "failed"
    assert "consumer c0 could not run for" in report.reason, report.reason
    assert report.analysis.accounting.lost == 0


def _stall(pid: int, seconds: float) -> None:
    os.kill(pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.kill(pid, signal.SIGCONT)


def external_cell(client: dict[str, Any]) -> Cell:
    raw = {
        "name": "side_by_side",
        "systems": [
            {
                "system": "kafka",
                "brokers": "external",
                "connection": "sixnines_kafka_external",
                "broker": {"partitions": 2},
                "client": client,
            }
        ],
        "workload": {"message_size_bytes": 256, "rate_per_s": RATE, **PHASES},
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "side_by_side"))
    return cell


def test_librdkafka_and_the_java_client_side_by_side_on_one_broker(
    tmp_path: Path, console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One SASL/SCRAM broker, two cells in one run that differ only in the client library: both land every
    message; the Java client logs in with the cell's credentials, which reach no record and no worker's plan."""
    cluster = KafkaCluster(NEWEST, 1, {}, tmp_path / "kafka", security="sasl_plaintext", sasl_mechanism="SCRAM-SHA-256")
    with cluster:
        client = cluster.client_config
        port = cluster.endpoint.nodes[0].port if cluster.endpoint else 0
        conn = {
            "conn_type": "kafka",
            "host": "127.0.0.1",
            "port": port,
            "login": client["sasl.username"],
            "password": client["sasl.password"],
            "extra": {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256"},
        }
        monkeypatch.setenv("AIRFLOW_CONN_SIXNINES_KAFKA_EXTERNAL", json.dumps(conn))
        lake, run = Lake(tmp_path / "lake"), RunInfo.new()
        plans: list[str] = []
        original = ExternalWorker.start

        def start(self: ExternalWorker) -> None:
            original(self)
            plans.append((self.scratch / "plan.properties").read_text())

        monkeypatch.setattr(ExternalWorker, "start", start)
        libraries = ("librdkafka", "java")
        reports = [run_cell(external_cell({"library": library}), lake, run, console) for library in libraries]

    for report in reports:
        assert report.status == "ok", report.reason
        acc = report.analysis.accounting
        assert acc.scheduled == acc.sent == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    java = json.loads((reports[1].path / "result.json").read_text())["harness"]["workers"]["producer p0"]
    assert java["program"]["client"]["library"] == "kafka-clients"
    assert len(plans) == 2 and all("sasl" not in plan for plan in plans)
    assert client["sasl.password"] not in lake_text(tmp_path / "lake")


def lake_text(root: Path) -> str:
    """Every text-like file the run wrote to the lake (results, worker logs)."""
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.suffix in (".json", ".log"))
