"""Faults on one node's own link: a JetStream R3 cluster whose three nodes each run in a network namespace of their
own (`workload.placement.broker: [b1, b2, b3]`), routes crossing the bridge, the load on a fourth host. A
`partition` takes one node's link down for its duration, a `bandwidth` squeeze shapes it (tc tbf); the per-fault
record says what it cost, and every link and namespace is gone afterwards. Needs root (`ip netns add`); skipped,
saying why, where namespaces cannot be created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import Cell, parse_matrix
from bench_tasks.topology import netns

from .test_netns_hosts import ours, received

_WHY_NOT = netns.permitted()
pytestmark = [
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.skipif(_WHY_NOT is not None, reason=f"cannot create network namespaces here: {_WHY_NOT}"),
]

HOSTS = {"b1": {"netns": "b1"}, "b2": {"netns": "b2"}, "b3": {"netns": "b3"}, "lg": {"netns": "lg"}}
R3 = {"mode": "jetstream", "storage": "file", "servers": 3, "replicas": 3}


def node_cell(faults: list[dict[str, Any]], **workload: Any) -> Cell:
    raw: dict[str, Any] = {
        "name": "itest_netns_faults",
        "hosts": HOSTS,
        "systems": [{"system": "nats", "versions": ["latest"], "broker": R3}],
        "workload": {
            "message_size_bytes": 1024,
            "rate_per_s": 200,
            "warmup_s": 1,
            "measure_s": 4,
            "cooldown_s": 0.5,
            "drain_timeout_s": 10,
            "max_schedule_lag_ms": 1000,  # a fault is under test, not the generator's precision
            "placement": {"broker": ["b1", "b2", "b3"], "producers": ["lg"], "consumers": ["lg"]},
            **workload,
        },
        "measurements": ["e2e"],
        "faults": faults,
    }
    (cell,) = select_cells(parse_matrix(raw, "itest_netns_faults"))
    return cell


def window_latency_ms(report: Any, record: dict[str, Any], begin_s: float, end_s: float) -> np.ndarray:
    """Response times (ms) of the messages meant to be sent between `begin_s` and `end_s` of the measure phase
    (whose start a fault's record gives: it fired `fired_s` after it, at `start_ns`)."""
    table = received(report)
    measure_start_ns = record["start_ns"] - record["fired_s"] * 1e9
    intended = table["intended_ns"].to_numpy()
    chosen = (intended >= measure_start_ns + begin_s * 1e9) & (intended < measure_start_ns + end_s * 1e9)
    return (table["received_ns"].to_numpy()[chosen] - intended[chosen]) / 1e6


def test_a_partition_of_a_follower_then_of_the_stream_leader(tmp_path: Path, console: Console) -> None:
    """A follower cut off 1 s: the leader keeps its place, and the stream serves again within the fault's window
    (the producer and consumer may be connected to the cut node: then their TCP retransmits carry on once the link
    is back). Then the leader cut off 10 s, longer than JetStream's Raft election timeout (4-9 s without a
    heartbeat): the other two elect a new leader. Nothing acknowledged is lost: a cut-off leader has no majority
    to acknowledge with."""
    before = ours()
    follower = {"at_s": 0.5, "action": "partition", "target": "follower", "duration_s": 1}
    leader = {"at_s": 3.5, "action": "partition", "target": "leader", "duration_s": 10}
    report = run_cell(node_cell([follower, leader], measure_s=14), Lake(tmp_path), RunInfo.new(), console)

    cut_follower, cut_leader = report.faults
    print(f"\nper-fault records:\n{cut_follower}\n{cut_leader}\naccounting: {report.analysis.accounting}")
    assert report.status == "ok", report.reason
    assert cut_follower["node"] != cut_follower["leader_before"] and cut_follower["node"] in (1, 2, 3)
    assert cut_follower["leader_after"] == cut_follower["leader_before"]
    assert cut_follower["ended_s"] - cut_follower["fired_s"] == pytest.approx(1.0, abs=0.1)
    assert cut_follower["first_arrival_after_s"] is not None and cut_follower["first_arrival_after_s"] < 3.0
    assert cut_leader["node"] == cut_leader["leader_before"] and cut_leader["node"] in (1, 2, 3)
    assert cut_leader["ended_s"] - cut_leader["fired_s"] == pytest.approx(10.0, abs=0.1)
    assert cut_leader["leader_after"] not in (None, cut_leader["node"])  # the other two elected a new leader
    # Served again: before the link came back when the clients are connected to another node (seen: 4.0 s), or
    # shortly after it when they are connected to the cut one (seen: 11.2 s): nats-py pings its server every
    # 120 s, so it waits out the cut on its connection rather than reconnecting elsewhere.
    first = cut_leader["first_arrival_after_s"]
    assert first is not None and first < 10.0 + 3.0
    assert cut_follower["acknowledged_but_lost"] == cut_leader["acknowledged_but_lost"] == 0
    assert report.analysis.accounting.acknowledged_but_lost == 0
    assert ours() == before


def test_a_bandwidth_squeeze_of_the_stream_leader(tmp_path: Path, console: Console) -> None:
    """The leader's link at 1 Mbit/s for 2 s while 200 msg/s of 1 KiB cross it (to the consumer and to both
    followers): the shaper holds packets back (overlimits) and latency rises; afterwards the link is unshaped."""
    before = ours()
    squeeze = {"at_s": 1, "action": "bandwidth", "target": "leader", "duration_s": 2, "rate_mbit": 1}
    report = run_cell(node_cell([squeeze], measure_s=5), Lake(tmp_path), RunInfo.new(), console)

    (record,) = report.faults
    print(f"\nper-fault record: {record}\naccounting: {report.analysis.accounting}")
    assert report.status == "ok", report.reason
    assert record["node"] == record["leader_before"] and record["rate_mbit"] == 1
    assert record["ended_s"] - record["fired_s"] == pytest.approx(2.0, abs=0.1)
    assert set(record["shaper"]) == {"out", "in"} and record["shaper_overlimits"] > 0
    before_ms = window_latency_ms(report, record, 0, record["fired_s"])
    during_ms = window_latency_ms(report, record, record["fired_s"], record["ended_s"])
    print(f"p99 before {np.percentile(before_ms, 99):.1f} ms, during {np.percentile(during_ms, 99):.1f} ms")
    assert np.percentile(during_ms, 99) > 3 * np.percentile(before_ms, 99)
    assert record["acknowledged_but_lost"] == 0
    assert ours() == before
