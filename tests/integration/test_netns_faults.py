"""Faults on one node's own link: a JetStream R3 cluster whose three nodes each run in a network namespace of their
own (`workload.placement.broker: [b1, b2, b3]`), routes crossing the bridge, the load on a fourth host. A
`partition` takes one node's link down for its duration, a `bandwidth` squeeze shapes it (tc tbf); the per-fault
record says what it cost, and every link and namespace is gone afterwards. Needs root (`ip netns add`); skipped,
saying why, where namespaces cannot be created."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import Cell, parse_matrix
from bench_tasks.topology import netns

from .test_netns_hosts import ours

_WHY_NOT = netns.permitted()
pytestmark = [
    pytest.mark.usefixtures("no_orphans"),
    pytest.mark.skipif(_WHY_NOT is not None, reason=f"cannot create network namespaces here: {_WHY_NOT}"),
]

HOSTS = {"b1": {"netns": "b1"}, "b2": {"netns": "b2"}, "b3": {"netns": "b3"}, "lg": {"netns": "lg"}}
R3 = {"mode": "jetstream", "storage": "file", "servers": 3, "replicas": 3}


def node_cell(fault: dict[str, Any], **workload: Any) -> Cell:
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
        "faults": [fault],
    }
    (cell,) = select_cells(parse_matrix(raw, "itest_netns_faults"))
    return cell


def test_a_partition_of_the_stream_leader(tmp_path: Path, console: Console) -> None:
    before = ours()
    fault = {"at_s": 1, "action": "partition", "target": "leader", "duration_s": 2}
    report = run_cell(node_cell(fault), Lake(tmp_path), RunInfo.new(), console)

    (record,) = report.faults
    print(f"\nper-fault record: {record}\naccounting: {report.analysis.accounting}\nreason: {report.reason}")
    broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    print(broker["leader_changes"])
    assert ours() == before
