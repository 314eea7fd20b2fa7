"""RabbitMQ's Java client through the JVM worker (`client: {library: java}`), against a real RabbitMQ node on
127.0.0.1: a quorum-queue e2e cell with manual acknowledgements and the broker's confirms timed, and a two-hop
chain, each landed with every message accounted for and the client described as the worker ran it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import Cell
from bench_tasks.systems.rabbitmq.jvm_client import CLIENT

from .helpers import ALL_PHASES_S, assert_every_message_acknowledged_and_received, make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")
RATE, MEASURE_S = 300, 1  # the helpers' warmup and cooldown around 1 s measured, as test_rabbitmq_cells.py
JAVA = {"library": "java"}


def java_cell(measurement: str, broker: dict[str, Any], client: dict[str, Any] | None = None, **workload: Any) -> Cell:
    shape = {"rate_per_s": RATE, "measure_s": MEASURE_S, **workload}
    return make_cell(measurement, broker, "rabbitmq", client={**JAVA, **(client or {})}, **shape)


def test_quorum_e2e_cell_with_manual_acks_lands_every_message(tmp_path: Path, console: Console) -> None:
    cell = java_cell("e2e", {"queue_type": "quorum"}, {"acks": "manual", "prefetch": 100})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert_every_message_acknowledged_and_received(report, RATE * MEASURE_S)  # each confirm timed
    received = pq.read_table(report.path / "received-c0.parquet")
    assert received.num_rows == RATE * ALL_PHASES_S  # every message once, every phase
    assert set(received["partition"].to_pylist()) == {0}  # a quorum queue's samples go to its leader, as pika's
    facts = json.loads((report.path / "result.json").read_text())["harness"]["workers"]
    client = facts["consumer c0"]["program"]["client"]
    assert (client["library"], client["version"]) == ("amqp-client", CLIENT[1])
    assert (client["acks"], client["prefetch"]) == ("manual", 100)
    assert facts["consumer c0"]["runtime"] == "jvm" and facts["consumer c0"]["client_errors"]["count"] == 0


def test_two_hop_chain_cell_lands_every_message_on_both_hops(tmp_path: Path, console: Console) -> None:
    report = run_cell(java_cell("chain", {"queue_type": "classic"}, relays=1), Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.relayed == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    relayed = pq.read_table(report.path / "relayed-r0.parquet").to_pylist()
    assert all(r["received_ns"] <= r["relay_sent_ns"] for r in relayed)
