"""Seed 002's two-hop service chain and seed 004's background traffic, on real NATS and Kafka brokers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import ALL_PHASES_S, make_cell, newest_kafka

pytestmark = pytest.mark.usefixtures("no_orphans")


def _table(folder: Path, pattern: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob(pattern))])


def _check_chain(report_path: Path, expected: int) -> None:
    """Every measured message went producer → relay → final consumer, and the per-hop times add up."""
    relayed = _table(report_path, "relayed-r*.parquet")
    final = _table(report_path, "received-c*.parquet")
    assert relayed.num_rows == final.num_rows == expected
    assert set(relayed["hop"].to_pylist()) == {1}
    assert set(final["hop"].to_pylist()) == {2}
    f = final.sort_by([("producer_id", "ascending"), ("seq", "ascending")])
    r = relayed.sort_by([("producer_id", "ascending"), ("seq", "ascending")])
    # The final consumer's copy of the relay's times is the relay's own record of them.
    assert f["relay_received_ns"].equals(r["received_ns"])
    assert f["relay_sent_ns"].equals(r["relay_sent_ns"])
    intended, sent = f["intended_ns"].to_numpy(), f["sent_ns"].to_numpy()
    relay_in, relay_out = f["relay_received_ns"].to_numpy(), f["relay_sent_ns"].to_numpy()
    received = f["received_ns"].to_numpy()
    assert (intended <= sent).all() and (sent < relay_in).all()
    assert (relay_in <= relay_out).all() and (relay_out < received).all()


def test_nats_two_hop_chain(tmp_path: Path, console: Console) -> None:
    cell = make_cell("chain", rate_per_s=400, relays=2, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.relayed == acc.received == 400
    assert acc.lost == acc.duplicated == 0
    metrics = report.analysis.metrics
    assert set(metrics) == {"e2e", "hop1", "hop2"}
    for basis in ("intended", "sent"):
        assert metrics["hop1"][basis].count == metrics["hop2"][basis].count == metrics["e2e"][basis].count == 400
        # The total of a message is its two hops; so the total's max cannot be below either hop's max.
        assert metrics["e2e"][basis].max_ns >= max(metrics["hop1"][basis].max_ns, metrics["hop2"][basis].max_ns)
    _check_chain(report.path, expected=int(400 * ALL_PHASES_S))  # all phases at 400/s


def test_nats_background_traffic_multiplexed(tmp_path: Path, console: Console) -> None:
    background = {"traffic": {"message_size_bytes": 4096, "rate_per_producer_per_s": 2, "producers": 150}}
    background["traffic"]["consumers"] = 1
    cell = make_cell("e2e", rate_per_s=200, background=background)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    assert report.analysis.accounting.received == report.analysis.accounting.sent == 200
    result = json.loads((report.path / "result.json").read_text())
    traffic = result["background"]["traffic"]
    assert traffic["scheduled"] == 150 * 2 * ALL_PHASES_S  # 150 logical producers × 2/s, every phase
    assert traffic["sent"] == traffic["scheduled"] and traffic["errors"] == 0
    assert 0 < traffic["consumed"] <= traffic["sent"]
    assert traffic["schedule_lag"]["count"] == traffic["sent"]
    # Background messages never reach the measured consumers' files.
    assert _table(report.path, "received-c*.parquet").num_rows == 200 * ALL_PHASES_S


@pytest.mark.parametrize("keys", ["per_producer"])
def test_kafka_chain_with_keyed_background(keys: str, tmp_path: Path, console: Console) -> None:
    """Seed 004's shape at small scale: a measured stream beside 200 keyed background producers spread over
    two processes and many partitions, here also relayed through a service (seed 002)."""
    background = {
        "traffic": {
            "message_size_bytes": 8192,
            "rate_per_producer_per_s": 1,
            "producers": 200,
            "processes": 2,
            "consumers": 1,
            "partitions": 16,
            "keys": keys,
            "producer": {"acks": "0", "linger.ms": 0},
        }
    }
    cell = make_cell(
        "chain",
        system="kafka",
        version=newest_kafka(),
        broker={"brokers": 1, "partitions": 2},
        client={"producer": {"acks": "1"}},
        background=background,
        rate_per_s=200,
        warmup_s=3,
        measure_s=1,
        cooldown_s=1,
        drain_timeout_s=5,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.relayed == acc.received == 200
    assert acc.lost == 0
    result = json.loads((report.path / "result.json").read_text())
    traffic = result["background"]["traffic"]
    assert traffic["scheduled"] == 200 * 1 * 5
    assert traffic["sent"] == traffic["acked"] == traffic["scheduled"]
    assert 0 < traffic["consumed"] <= traffic["sent"]
    _check_chain(report.path, expected=5 * 200)
    final = _table(report.path, "received-c*.parquet")
    # Samples are attributed to the leader of the second hop's partition (one broker: node 1).
    assert set(pc.unique(final["leader"]).to_pylist()) == {1}
    assert np.isin(final["partition"].to_numpy(), [0, 1]).all()


def test_kafka_background_subscriptions_each_read_every_message(tmp_path: Path, console: Console) -> None:
    """OMB's subscriptions per topic on the background: two consumer groups of two consumers each, and each group
    reads the background's messages, so the broker delivers each twice; the measured stream is untouched."""
    background = {
        "others": {
            "message_size_bytes": 1024,
            "rate_per_producer_per_s": 50,
            "producers": 8,
            "processes": 2,
            "consumers": 2,
            "subscriptions": 2,
            "partitions": 4,
        }
    }
    cell = make_cell(
        "e2e",
        system="kafka",
        version=newest_kafka(),
        broker={"brokers": 1, "partitions": 1},
        background=background,
        rate_per_s=200,
        warmup_s=0.5,
        measure_s=1.5,
        cooldown_s=0.5,
    )
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.received == 200 * 1.5 and acc.lost == 0  # the measure phase
    others = json.loads((report.path / "result.json").read_text())["background"]["others"]
    assert others["scheduled"] == others["sent"] == others["acked"] == 8 * 50 * 2.5
    first, second = others["consumed_per_subscription"]
    assert first + second == others["consumed"]
    # Each group reads the messages sent after it joined, until the consumers stop at the schedule's end.
    assert others["sent"] * 0.5 < first <= others["sent"] and others["sent"] * 0.5 < second <= others["sent"]
