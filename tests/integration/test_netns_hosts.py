"""Load-generator hosts as network namespaces: a real nats-server in one namespace, the generators' workers in
others, traffic over veth links and a bridge, optionally capped with tc tbf. Needs root (`ip netns add`); the
tests skip, saying why, where namespaces cannot be created."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.detached import start_generator
from bench_tasks.cell.lifecycle import land_step, prepare_cell, provision_when_free
from bench_tasks.cell.runner import CellReport, run_cell, select_cells
from bench_tasks.cell.teardown import teardown_step
from bench_tasks.cell.watch import watch_phase
from bench_tasks.cell.work import CellWork
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.topology import netns

_WHY_NOT = netns.permitted()
NEEDS_NETNS = pytest.mark.skipif(_WHY_NOT is not None, reason=f"cannot create network namespaces here: {_WHY_NOT}")
# The pytestmark of every namespace test file: they count the host's namespaces, so each has the host alone.
NETNS_TESTS = [pytest.mark.usefixtures("no_orphans"), NEEDS_NETNS, pytest.mark.host_alone]
pytestmark = NETNS_TESTS

NODE_HOSTS = {"b1": {"netns": "b1"}, "b2": {"netns": "b2"}, "b3": {"netns": "b3"}, "lg": {"netns": "lg"}}

HOSTS = {
    "brokerhost": {"netns": "broker"},
    "loadgen1": {"queue": "loadgen_1", "netns": "lg1"},
    "loadgen2": {"queue": "loadgen_2", "netns": "lg2"},
}


def netns_cell(
    placement: dict[str, Any], network: dict[str, Any] | None = None, mode: str = "core", **workload: Any
) -> Cell:
    raw: dict[str, Any] = {
        "name": "itest_hosts",
        "hosts": HOSTS,
        "systems": [{"system": "nats", "versions": ["latest"], "broker": {"mode": mode}}],
        "workload": {
            "message_size_bytes": 256,
            "rate_per_s": 500,
            "warmup_s": 1,
            "measure_s": 2,
            "cooldown_s": 0.5,
            "drain_timeout_s": 3,
            # these tests are about where traffic flows, not the generator's precision: on a shared 2-core host
            # under other load, the default 100 ms lag gate would fail cells for reasons that are not theirs
            "max_schedule_lag_ms": 1000,
            "placement": {"broker": "brokerhost", **placement},
            **workload,
        },
        "measurements": ["e2e"],
    }
    if network is not None:
        raw["network"] = network
    (cell,) = select_cells(parse_matrix(raw, "itest_hosts"))
    return cell


def ours() -> list[str]:
    return [ns for ns in netns.list_namespaces() if ns.startswith(f"{netns.PREFIX}-")]


def received(report: CellReport) -> pa.Table:
    assert report.path is not None
    return pa.concat_tables([pq.read_table(p) for p in sorted(report.path.glob("received-c*.parquet"))])


def measure_latency_ms(report: CellReport) -> np.ndarray:
    """Response time (received − intended) of every measure-phase sample, in ms, ordered by intended time."""
    table = received(report)
    measure = np.asarray(table["phase"].to_pylist()) == "measure"
    intended = table["intended_ns"].to_numpy()[measure]
    latency = (table["received_ns"].to_numpy()[measure] - intended) / 1e6
    return latency[np.argsort(intended)]


def test_broker_in_one_namespace_generators_in_another(tmp_path: Path, console: Console) -> None:
    before = ours()
    cell = netns_cell({"producers": ["loadgen1"], "consumers": ["loadgen1"]}, producers=2, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.received == 1000 and acc.lost == acc.duplicated == 0
    e2e = report.analysis.metrics["e2e"]["intended"]
    assert 0 < e2e.percentiles["50"] < 50e6  # sane: above zero, well under 50 ms on an idle bridge
    hosts = json.loads((report.path / "result.json").read_text())["context"]["hosts"]
    assert hosts["hosts"]["brokerhost"]["address"] == "10.99.0.2"
    assert hosts["hosts"]["loadgen1"]["netns_name"].endswith("-lg1")
    assert hosts["roles"]["producers"] == {"0": "loadgen1", "1": "loadgen1"}
    # the traffic crossed the loadgen1 link: at least every message's payload left the host and came back
    link = hosts["link_stats"]["loadgen1"]
    assert link["tx_bytes"] > 2000 * 256 and link["rx_bytes"] > 2000 * 256 and "shaper" not in link
    assert ours() == before  # namespaces and links removed


def test_producers_on_two_hosts_each_with_own_consumers(tmp_path: Path, console: Console) -> None:
    cell = netns_cell(
        {"producers": ["loadgen1", "loadgen2"], "consumers": ["loadgen1", "loadgen2"]}, producers=2, consumers=2
    )
    run = RunInfo.new()
    report = run_cell(cell, Lake(tmp_path), run, console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == 1000 and acc.lost == acc.duplicated == 0
    table = received(report)
    # producer i and consumer i share host i; each consumer received only its own host's producer
    pairs = set(zip(table["consumer_id"].to_pylist(), table["producer_id"].to_pylist(), strict=True))
    assert pairs == {(0, 0), (1, 1)}
    # one schedule: both hosts' first messages are intended within one inter-arrival gap of the common t0
    sent = pa.concat_tables([pq.read_table(p) for p in sorted(report.path.glob("sent-p*.parquet"))])
    t0 = pq.read_table(Lake(tmp_path).cells_path(run))["t0_ns"][0].as_py()
    for producer in (0, 1):
        mine = sent.filter(pa.compute.equal(sent["producer_id"], producer))
        first_intended = int(np.min(mine["intended_ns"].to_numpy()))
        first_sent = int(np.min(mine["sent_ns"].to_numpy()))
        assert 0 <= first_intended - t0 < 2_000_000 + 1  # 500/s over 2 producers: gaps of 2 ms, interleaved
        assert first_sent - first_intended < 50_000_000  # both hosts started on time
    latency = measure_latency_ms(report)
    assert latency.size == 1000 and 0 < np.median(latency) < 50


def test_jetstream_gets_one_stream_per_clock_domain(tmp_path: Path, console: Console) -> None:
    """JetStream across two generator hosts: the stream of each domain is created from the broker's namespace,
    every publish is acknowledged, and each host's consumer reads only its own host's stream."""
    placement = {"producers": ["loadgen1", "loadgen2"], "consumers": ["loadgen1", "loadgen2"]}
    cell = netns_cell(placement, mode="jetstream", producers=2, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == acc.received == 1000 and acc.lost == 0
    table = received(report)
    assert set(zip(table["consumer_id"].to_pylist(), table["producer_id"].to_pylist(), strict=True)) == {(0, 0), (1, 1)}


def test_cross_domain_e2e_with_a_measured_clock_offset(tmp_path: Path, console: Console) -> None:
    """Producers on loadgen1, consumers on loadgen2: allowed only because the matrix accepts a measured offset,
    which is measured between the two namespaces and recorded. One kernel clock: the true offset is 0."""
    placement = {"producers": ["loadgen1"], "consumers": ["loadgen2"], "cross_host_clock": "measure_offset"}
    report = run_cell(netns_cell(placement), Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    assert report.analysis.accounting.received == report.analysis.accounting.sent == 1000
    (offset,) = json.loads((report.path / "result.json").read_text())["context"]["hosts"]["clock_offsets"]
    assert (offset["from_host"], offset["to_host"]) == ("loadgen1", "loadgen2")
    assert offset["exchanges"] == 50 and 0 < offset["min_rtt_ns"] < 50_000_000
    assert abs(offset["offset_ns"]) <= offset["uncertainty_ns"] + 1


def test_tbf_cap_bites(tmp_path: Path, console: Console) -> None:
    """1 KiB × 1000/s (~8.5 Mbit/s with headers) through links capped at 3 Mbit/s: messages queue behind the
    shaper (and in the TCP send buffers behind it), so response time keeps growing through the measure phase;
    uncapped, it stays flat and low. The drain then delivers the backlog, seconds late."""
    load = {"message_size_bytes": 1024, "rate_per_s": 1000, "producers": 1, "consumers": 1}
    place = {"producers": ["loadgen1"], "consumers": ["loadgen1"]}
    free = run_cell(netns_cell(place, **load), Lake(tmp_path), RunInfo.new(), console)
    capped = run_cell(netns_cell(place, {"rate_mbit": 3}, **load), Lake(tmp_path), RunInfo.new(), console)
    assert free.status == "ok", free.reason

    free_ms, capped_ms = measure_latency_ms(free), measure_latency_ms(capped)
    assert free_ms.size == 2000 and np.median(free_ms) < 20
    # capped: every message waited far longer, and each later one longer still (the backlog behind the shaper
    # grows by ~(8.5 - 3) Mbit every second); uncapped, the last quarter is as fast as the first
    assert np.median(capped_ms) > 10 * np.median(free_ms) and np.median(capped_ms) > 100
    quarter, free_quarter = capped_ms.size // 4, free_ms.size // 4
    assert np.median(capped_ms[-quarter:]) - np.median(capped_ms[:quarter]) > 500  # > 0.5 s more in 1.5 s
    assert np.median(free_ms[-free_quarter:]) < 20
    shaper = json.loads((capped.path / "result.json").read_text())["context"]["hosts"]["link_stats"]["loadgen1"]
    assert shaper["shaper"]["out"]["overlimits"] > 0  # the producer's side of the link was held back by tbf


def test_detached_lifecycle_removes_its_namespaces(tmp_path: Path) -> None:
    """Airflow's steps: provision builds the namespaces (recorded in state.json), teardown removes them."""
    cell = prepare_cell(netns_cell({"producers": ["loadgen1"], "consumers": ["loadgen1"]}))
    run, work = RunInfo.new(), CellWork(tmp_path / "work")
    provision_when_free(cell, run, tmp_path / "lake", work)
    state = work.read(work.state)
    assert state is not None and state["placement"]["topology"] is not None
    topology = state["placement"]["topology"]
    names = [h["netns"] for h in topology["hosts"].values()] + [topology["switch"]]
    assert set(names) <= set(netns.list_namespaces())
    assert state["brokers"]["address"].startswith("nats://10.99.0.")
    try:
        start_generator(work)
        for phase in ("warmup", "measure", "cooldown"):
            watch_phase(work, phase, log=lambda _: None, poll_s=0.2)
        landed = land_step(work)
        assert landed["status"] == "ok", landed["reason"]
    finally:
        report = teardown_step(work)
    assert sorted(report["namespaces_removed"]) == sorted(names)
    assert not set(names) & set(netns.list_namespaces())


def test_failed_cell_still_removes_namespaces(tmp_path: Path, console: Console) -> None:
    before = ours()
    raw_cell = netns_cell({"producers": ["loadgen1"], "consumers": ["loadgen1"]})
    broker = raw_cell.spec.broker.model_copy(update={"server": {"ping_interval": "not-a-duration"}})
    cell = raw_cell.model_copy(update={"spec": raw_cell.spec.model_copy(update={"broker": broker})})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "failed" and "ping_interval" in (report.reason or "")  # nats-server refuses its config
    assert ours() == before


def test_half_built_topology_is_removed(tmp_path: Path) -> None:
    """A namespace that cannot be created (its name is taken) undoes everything built before it."""
    from bench_tasks.errors import NetworkError
    from bench_tasks.spec.placement import Host

    token = "t" + netns.secrets.token_hex(3)
    blocker = f"{netns.PREFIX}-{token}-lg2"
    netns._ip("ip", "netns", "add", blocker)
    try:
        hosts = {"a": Host(netns="lg1"), "b": Host(netns="lg2")}
        with pytest.raises(NetworkError, match="File exists"):
            netns.create(netns.layout(hosts, ["a", "b"], None, token))
        assert netns.leftovers(token) == [blocker]  # ours are gone; the one we did not create is left alone
    finally:
        netns._ip("ip", "netns", "del", blocker)
    assert netns.leftovers(token) == []


def test_netns_clean_removes_only_idle_leftovers() -> None:
    """What a hard-killed run leaves (namespaces nobody runs in) goes; a namespace with a process stays."""
    idle, busy = "i" + netns.secrets.token_hex(3), "b" + netns.secrets.token_hex(3)
    for token in (idle, busy):
        for suffix in ("lg1", "sw"):
            netns._ip("ip", "netns", "add", f"{netns.PREFIX}-{token}-{suffix}")
    sleeper = subprocess.Popen(["ip", "netns", "exec", f"{netns.PREFIX}-{busy}-lg1", "sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while not netns.pids_in(f"{netns.PREFIX}-{busy}-lg1") and time.monotonic() < deadline:
            time.sleep(0.05)
        done = subprocess.run(
            [sys.executable, "-m", "bench_tasks", "netns-clean"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert netns.leftovers(idle) == []
        assert sorted(netns.leftovers(busy)) == [f"{netns.PREFIX}-{busy}-lg1", f"{netns.PREFIX}-{busy}-sw"]
    finally:
        sleeper.kill()
        sleeper.wait(10)
        for name in netns.leftovers(busy) + netns.leftovers(idle):
            netns._ip("ip", "netns", "del", name)
