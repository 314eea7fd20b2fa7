"""Broker clusters inside a network namespace: a 3-broker KRaft Kafka cluster and a 3-node NATS JetStream cluster
run in the broker host's namespace, listening and advertising on its address, with producers and consumers in
generator namespaces reaching them across the veth links. Leaders are watched and faults hit the leader from
the broker's namespace; every namespace and process is gone afterwards. Needs root (`ip netns add`); skipped,
saying why, where namespaces cannot be created. Phases are a few seconds: the host has 2 shared cores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.drive import Fault
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import CellWork
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.topology import netns

from .test_netns_hosts import HOSTS, NETNS_TESTS, ours, received

pytestmark = NETNS_TESTS

BROKER_ADDRESS = "10.99.0.2"  # the first placed host (the broker's) gets the first address of netns.SUBNET


def placed_cell(system: dict[str, Any], load_hosts: list[str], **workload: Any) -> Cell:
    raw: dict[str, Any] = {
        "name": "itest_netns_clusters",
        "hosts": HOSTS,
        "systems": [{"versions": ["latest"], **system}],
        "workload": {
            "message_size_bytes": 256,
            "rate_per_s": 300,
            "producers": len(load_hosts),
            "consumers": len(load_hosts),
            "warmup_s": 1,
            "measure_s": 3,
            "cooldown_s": 0.5,
            "drain_timeout_s": 5,
            "max_schedule_lag_ms": 1000,  # where traffic flows is under test here, not the generator's precision
            "placement": {"broker": "brokerhost", "producers": load_hosts, "consumers": load_hosts},
            **workload,
        },
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "itest_netns_clusters"))
    return cell


def assert_gone(pids: list[int]) -> None:
    for pid in pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, pid


@pytest.mark.usefixtures("kafka_first_tier")
def test_three_kafka_brokers_in_a_namespace_serve_two_generator_hosts(tmp_path: Path, console: Console) -> None:
    """RF=3 over three KRaft nodes in the broker's namespace; a producer and a consumer on each of two generator
    hosts (one topic per clock domain); the leader of partition 0 is frozen for 0.5 s mid-measure."""
    before = ours()
    system = {"system": "kafka", "broker": {"brokers": 3, "partitions": 2, "replication_factor": 3}}
    cell = placed_cell(system, ["loadgen1", "loadgen2"])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("stall", 1.0, 0.5)])

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == 900  # the measure phase: 3 s at 300/s
    assert acc.lost == acc.duplicated == acc.acknowledged_but_lost == 0
    result = json.loads((report.path / "result.json").read_text())
    broker = result["context"]["broker"]
    nodes = broker["nodes"]
    assert [n["node_id"] for n in nodes] == [1, 2, 3]
    assert broker["bootstrap_servers"] == ",".join(f"{BROKER_ADDRESS}:{n['port']}" for n in nodes)
    for node in nodes:  # every listener (client, inter-broker, controller) on the namespace's address
        assert f"advertised.listeners=PLAINTEXT://{BROKER_ADDRESS}:{node['port']}" in node["server_properties"]
        assert f"CONTROLLER://{BROKER_ADDRESS}:{node['controller_port']}" in node["server_properties"]
    # the leader timeline was polled from inside the broker's namespace: both partitions, from the start
    changes = broker["leader_changes"]
    assert {c["partition"] for c in changes} == {0, 1} and {c["leader"] for c in changes} <= {1, 2, 3}
    (stall,) = report.faults
    assert stall["kind"] == "stall" and stall["end_ns"] - stall["start_ns"] >= 0.5e9
    table = received(report)
    assert table.column("leader").null_count == 0 and set(table.column("leader").to_pylist()) <= {1, 2, 3}
    # each generator host's consumer read only its own host's producer, across its own link
    pairs = set(zip(table["consumer_id"].to_pylist(), table["producer_id"].to_pylist(), strict=True))
    assert pairs == {(0, 0), (1, 1)}
    links = result["context"]["hosts"]["link_stats"]
    for host in ("loadgen1", "loadgen2"):
        assert links[host]["tx_bytes"] > 450 * 256 and links[host]["rx_bytes"] > 450 * 256
    assert report.analysis.metrics["e2e"]["intended"].max_ns >= 0.4e9  # the stall shows in the one-way latency
    assert_gone([n["pid"] for n in nodes])
    assert ours() == before


def test_three_node_nats_jetstream_cluster_in_a_namespace(tmp_path: Path, console: Console) -> None:
    """An R3 file stream on three nats-server nodes routed to each other on the broker namespace's address; the
    stream leader is frozen for 0.5 s; every publish is acknowledged and received, attributed to its leader."""
    before = ours()
    system = {"system": "nats", "broker": {"mode": "jetstream", "storage": "file", "servers": 3, "replicas": 3}}
    cell = placed_cell(system, ["loadgen1"])
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console, faults=[Fault("stall", 1.0, 0.5)])

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == 900  # the measure phase: 3 s at 300/s
    assert acc.lost == acc.duplicated == acc.acknowledged_but_lost == 0
    broker = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert [n["url"].rsplit(":", 1)[0] for n in broker["nodes"]] == [f"nats://{BROKER_ADDRESS}"] * 3
    for node in broker["nodes"]:
        others = [n["cluster_port"] for n in broker["nodes"] if n is not node]
        assert all(f"nats-route://{BROKER_ADDRESS}:{port}" in node["config"] for port in others)
    (first, *_) = broker["leader_changes"]
    assert first["partition"] == 0 and first["leader"] in (1, 2, 3)
    (stall,) = report.faults
    assert stall["kind"] == "stall"
    table = received(report)
    assert table.column("leader").null_count == 0 and set(table.column("leader").to_pylist()) <= {1, 2, 3}
    assert report.analysis.metrics["e2e"]["intended"].max_ns >= 0.4e9  # the frozen leader held the stream
    assert_gone([n["pid"] for n in broker["nodes"]])
    assert ours() == before


def run_detached(cell: Cell, tmp_path: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Airflow's steps for `cell` with a 0.5 s stall of the leader 0.5 s into measure: (state, landed,
    teardown report); the namespaces and broker processes are checked to be gone."""
    run, work = RunInfo.new(), CellWork(tmp_path / "work")
    stall = [{"kind": "stall", "at_s": 0.5, "duration_s": 0.5}]
    provision_when_free(prepare_cell(cell), run, tmp_path / "lake", work, faults=stall)
    state = work.read(work.state)
    assert state is not None and state["placement"]["topology"] is not None and state["brokers"] is not None
    topology = state["placement"]["topology"]
    names = [h["netns"] for h in topology["hosts"].values()] + [topology["switch"]]
    assert state["brokers"]["netns"] == topology["hosts"]["brokerhost"]["netns"]
    try:
        start_generator(work)
        for phase in ("warmup", "measure", "cooldown"):
            watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
        landed = land_step(work)
    finally:
        report = teardown_step(work)
    assert sorted(report["namespaces_removed"]) == sorted(names)
    assert not set(names) & set(netns.list_namespaces())
    assert_gone(list(state["brokers"]["nodes"].values()))
    return state, landed, report


def test_detached_kafka_broker_in_a_namespace_through_airflow_steps(tmp_path: Path) -> None:
    """One KRaft broker in the broker's namespace under Airflow's steps: provision records the namespace with the
    brokers, the detached generator watches partition leaders and stalls the leader from it, teardown stops the
    broker and removes every namespace."""
    system = {"system": "kafka", "broker": {"brokers": 1, "partitions": 1}}
    state, landed, _ = run_detached(placed_cell(system, ["loadgen2"], warmup_s=0.5, measure_s=2), tmp_path)
    assert landed["status"] == "ok", landed["reason"]
    assert state["brokers"]["address"].startswith(f"{BROKER_ADDRESS}:")
    result = json.loads((Path(landed["path"]) / "result.json").read_text())
    assert result["context"]["broker"]["leader_changes"][0]["leader"] == 1  # watched from the namespace
    assert [f["kind"] for f in result["faults"]] == ["stall"]


def test_detached_nats_cluster_in_a_namespace_through_airflow_steps(tmp_path: Path) -> None:
    """A 3-node NATS cluster under Airflow's steps: the detached generator follows the stream leader through the
    monitor ports provision recorded (inside the broker's namespace) and stalls that leader."""
    system = {"system": "nats", "broker": {"mode": "jetstream", "servers": 3, "replicas": 3}}
    state, landed, _ = run_detached(placed_cell(system, ["loadgen1"], warmup_s=0.5, measure_s=2), tmp_path)
    assert landed["status"] == "ok", landed["reason"]
    assert sorted(state["brokers"]["leader"]["monitors"]) == ["1", "2", "3"]
    assert all(url.startswith(f"http://{BROKER_ADDRESS}:") for url in state["brokers"]["leader"]["monitors"].values())
    result = json.loads((Path(landed["path"]) / "result.json").read_text())
    (first, *_) = result["context"]["broker"]["leader_changes"]
    assert first["partition"] == 0 and first["leader"] in (1, 2, 3)
    assert [f["kind"] for f in result["faults"]] == ["stall"]
    assert result["accounting"]["lost"] == 0
