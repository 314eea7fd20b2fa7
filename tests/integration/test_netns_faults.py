"""Faults on one node's own link: a JetStream R3 cluster whose three nodes each run in a network namespace of their
own (`workload.placement.broker: [b1, b2, b3]`), routes crossing the bridge, the load on a fourth host. A
`partition` takes one node's link down for its duration, a `bandwidth` squeeze shapes it (tc tbf); the per-fault
record says what it cost, and every link and namespace is gone afterwards. Needs root (`ip netns add`); skipped,
saying why, where namespaces cannot be created."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.topology import netns

from .test_netns_hosts import NETNS_TESTS, NODE_HOSTS, ours, received

pytestmark = NETNS_TESTS

HOSTS = NODE_HOSTS
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
    # 6.5 s of sending after the leader's link is back: a message is sent once, so the stream can only show that
    # it serves again with messages still being sent. A clean CI run on a loaded host had the cut end 0.4 s before
    # the measure phase did (measure_s 14) and nothing sent in that last 0.9 s (cooldown included) got through.
    report = run_cell(node_cell([follower, leader], measure_s=20), Lake(tmp_path), RunInfo.new(), console)

    cut_follower, cut_leader = report.faults
    print(f"\nper-fault records:\n{cut_follower}\n{cut_leader}\naccounting: {report.analysis.accounting}")
    assert report.status == "ok", report.reason
    assert cut_follower["node"] != cut_follower["leader_before"] and cut_follower["node"] in (1, 2, 3)
    assert cut_follower["leader_after"] == cut_follower["leader_before"]
    assert cut_follower["ended_s"] - cut_follower["fired_s"] == pytest.approx(1.0, abs=0.1)
    assert cut_follower["first_arrival_after_s"] is not None and cut_follower["first_arrival_after_s"] < 3.0
    assert cut_leader["node"] == cut_leader["leader_before"] and cut_leader["node"] in (1, 2, 3)
    assert cut_leader["ended_s"] - cut_leader["fired_s"] == pytest.approx(10.0, abs=0.1)
    # The other two usually elect a new leader within the 10 s (every helper run), but a clean CI run on a loaded
    # host saw node 1 still named at the end: an election is not a promise of the cut, so it is not asserted.
    assert cut_leader["leader_after"] in (1, 2, 3)
    # Served again: before the link came back when the clients are connected to another node (seen: 4.0 s), or
    # after it when they are connected to the cut one (seen: 11.2 s, 13.3 s): nats-py pings its server every 120 s,
    # so it waits out the cut on its connection, and TCP's retransmission timer, doubled at every try from 200 ms,
    # may next fire up to about the cut's length after the link is back.
    first = cut_leader["first_arrival_after_s"]
    assert first is not None and first < 2 * 10.0 + 1
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


def link_state(topo: netns.Topology, host: str) -> tuple[str, str]:
    """(operational state of the bridge's end of `host`'s link, its root qdisc kind) as `ip`/`tc` show them."""
    port = topo.hosts[host].port
    link = json.loads(subprocess.run(["ip", "-n", topo.switch, "-j", "link", "show", port], capture_output=True).stdout)
    qdisc = json.loads(
        subprocess.run(["tc", "-n", topo.switch, "-j", "qdisc", "show", "dev", port], capture_output=True).stdout
    )
    return link[0]["operstate"], qdisc[0]["kind"]


@pytest.mark.alongside
def test_the_injector_cuts_squeezes_and_restores_real_links() -> None:
    """On an injected clock, over real namespaces: a partition takes the node's link down and brings it up when it
    has lasted; a squeeze puts a tbf at its rate on both ends and, when it ends, gives the link back as it was
    (no shaper), recording the shaper's counters; `close` restores a link still cut."""
    from bench_tasks.cell.faults import Fault, FaultInjector, FiredFault
    from bench_tasks.spec.placement import Host
    from bench_tasks.topology.links import NodeLinks

    topo = netns.layout({h: Host(netns=h) for h in ("b1", "b2")}, ["b1", "b2"], None)
    netns.create(topo)
    try:
        now, fired = [0], list[FiredFault]()
        faults = [Fault("partition", 1.0, 1.0, "node:2"), Fault("bandwidth", 3.0, 1.0, "node:1", 2.0)]
        control = Control()
        injector = FaultInjector(faults, control, 0, lambda: now[0], fired, links=NodeLinks(topo, {1: "b1", 2: "b2"}))
        seen = []
        for t in (1.0, 2.0, 3.0, 4.0):
            now[0] = int(t * 1e9)
            injector.tick(now[0])
            seen.append((link_state(topo, "b2")[0], link_state(topo, "b1")[1]))
        assert seen == [("DOWN", "noqueue"), ("UP", "noqueue"), ("UP", "tbf"), ("UP", "noqueue")]
        assert control.skipped == [2, None]  # leader polls skipped the cut node while it was cut
        cut, squeeze = fired
        assert (cut.node, cut.start_ns, cut.end_ns) == (2, 1_000_000_000, 2_000_000_000)
        assert (squeeze.node, squeeze.rate_mbit, set(squeeze.shaper or {})) == (1, 2.0, {"out", "in"})
        assert squeeze.shaper_drops == 0 and squeeze.shaper_overlimits == 0  # nothing crossed the idle link

        late = FaultInjector([Fault("partition", 0.0, 60.0, "node:1")], control, 0, lambda: 0, [], links=NodeLinks(
            topo, {1: "b1", 2: "b2"}))  # fmt: skip
        late.tick(0)
        assert link_state(topo, "b1")[0] == "DOWN"
        late.close()
        assert link_state(topo, "b1")[0] == "UP"
    finally:
        netns.destroy(topo)


class Control:
    """The broker side of the injector for link faults: node ids and which node polls skip."""

    def __init__(self) -> None:
        self.skipped: list[int | None] = []

    def fault_nodes(self) -> list[int]:
        return [1, 2]

    def fault_leader(self) -> int:
        return 1

    def fault_controller(self) -> int:
        return 1

    def skip_node(self, node: int | None) -> None:
        self.skipped.append(node)
