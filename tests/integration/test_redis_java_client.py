"""Redis's Java client (Lettuce) through the JVM worker (`client: {library: java}`), against a real redis-server on
127.0.0.1 that asks for the cell's password: a streams e2e cell with each XADD's reply timed, and a pub/sub two-hop
chain, each landed with every message accounted for and the client described as the worker ran it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.systems.redis.jvm_client import CLIENT

from .helpers import ALL_PHASES_S, assert_every_message_acknowledged_and_received, make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")
RATE, MEASURE_S = 300, 1  # the helpers' warmup and cooldown around 1 s measured, as test_redis_cells.py
JAVA = {"library": "java"}


def test_streams_e2e_cell_lands_every_entry_with_its_xadd_reply_timed(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", {"mode": "streams"}, "redis", client=JAVA, rate_per_s=RATE, measure_s=MEASURE_S)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    sent = assert_every_message_acknowledged_and_received(report, RATE * MEASURE_S)  # each XADD reply timed
    assert all(r["offset"] > 0 for r in sent)  # the entry id the reply carried
    received = pq.read_table(report.path / "received-c0.parquet")
    assert received.num_rows == RATE * ALL_PHASES_S  # every entry once, every phase
    assert set(received["partition"].to_pylist()) == {0}  # a stream is recorded as partition 0, as redis-py's
    offsets = received["offset"].to_pylist()
    assert offsets == sorted(offsets)  # entry ids, in the stream's order
    facts = json.loads((report.path / "result.json").read_text())["harness"]["workers"]
    client = facts["consumer c0"]["program"]["client"]
    assert (client["library"], client["version"], client["mode"]) == ("lettuce-core", CLIENT[1], "streams")
    assert facts["consumer c0"]["runtime"] == "jvm" and facts["consumer c0"]["client_errors"]["count"] == 0


def test_pubsub_chain_cell_lands_every_message_on_both_hops(tmp_path: Path, console: Console) -> None:
    cell = make_cell("chain", {"mode": "pubsub"}, "redis", client=JAVA, rate_per_s=RATE, measure_s=MEASURE_S, relays=1)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.relayed == acc.received == RATE * MEASURE_S and acc.lost == acc.duplicated == 0
    relayed = pq.read_table(report.path / "relayed-r0.parquet").to_pylist()
    assert all(r["received_ns"] <= r["relay_sent_ns"] for r in relayed)
