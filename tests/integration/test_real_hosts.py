"""One generator per real load-generator host: a real nats-server, and each host's share of the cell driven by
its own `sixnines cell host` process (as each host's Celery worker would run its generate task), meeting the
others through the lake on a common start time. On one machine the hosts share the kernel's clocks, which lets
the tests check what matters: the parts become one cell, cross-host samples are sane, every host started on
the agreed t0, a failing host fails the cell naming itself, and measured clock offsets are recorded."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.hostparts import collect_parts, publish_cell, run_host_part
from bench_tasks.cell.lifecycle import provision_brokers
from bench_tasks.cell.runner import CellReport, run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.topology.plan import resolve_placement
from bench_tasks.topology.rendezvous import Rendezvous

pytestmark = pytest.mark.usefixtures("no_orphans")

HOSTS = {"a": {"queue": "loadgen_1", "clock_domain": "lab"}, "b": {"queue": "loadgen_2", "clock_domain": "lab"}}


def real_hosts_cell(placement: dict[str, Any], measurement: str = "e2e", hosts: dict | None = None) -> Cell:
    raw: dict[str, Any] = {
        "name": "itest_real_hosts",
        "hosts": hosts or HOSTS,
        "systems": [{"system": "nats", "versions": ["latest"], "broker": {"mode": "core"}}],
        "workload": {
            "message_size_bytes": 256,
            "rate_per_s": 500,
            "producers": 2,
            "consumers": 2,
            "warmup_s": 1,
            "measure_s": 1,
            "cooldown_s": 0.5,
            "drain_timeout_s": 3,
            # these tests are about the hosts meeting, not the generator's precision on a loaded 2-core host
            "max_schedule_lag_ms": 1000,
            "placement": placement,
        },
        "measurements": [measurement],
    }
    (cell,) = select_cells(parse_matrix(raw, "itest_real_hosts"))
    return cell


def tables(report: CellReport, pattern: str) -> pa.Table:
    assert report.path is not None
    return pa.concat_tables([pq.read_table(p) for p in sorted(report.path.glob(pattern))])


def test_two_hosts_send_and_receive_across_each_other(tmp_path: Path, console: Console) -> None:
    """Producer i on host i, consumer i on the other host: every sample crosses hosts, in one clock domain."""
    cell = real_hosts_cell({"producers": ["a", "b"], "consumers": ["b", "a"]})
    run = RunInfo.new()
    report = run_cell(cell, Lake(tmp_path), run, console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.received == 500 and acc.lost == acc.duplicated == 0
    received = tables(report, "received-c*.parquet")
    assert set(received["producer_id"].to_pylist()) == {0, 1}  # the consumers share the subject (queue group)
    measure = np.asarray(received["phase"].to_pylist()) == "measure"
    latency_ms = (received["received_ns"].to_numpy() - received["intended_ns"].to_numpy())[measure] / 1e6
    assert latency_ms.size == 500 and 0 < np.median(latency_ms) < 50  # host clocks of one domain compare
    # one schedule: each host's producer intended its first message within one gap of the common t0
    t0 = pq.read_table(Lake(tmp_path).cells_path(run))["t0_ns"][0].as_py()
    sent = tables(report, "sent-p*.parquet")
    for producer in (0, 1):
        mine = sent.filter(pa.compute.equal(sent["producer_id"], producer))
        first_intended = int(np.min(mine["intended_ns"].to_numpy()))
        assert 0 <= first_intended - t0 <= 2_000_000  # 500/s over 2 producers: interleaved 2 ms gaps
        assert int(np.min(mine["sent_ns"].to_numpy())) - first_intended < 50_000_000  # both started on time
    assert abs(t0 / 1e9 - time.time()) < 600  # t0 is on the wall-clock epoch (the host clock)
    hosts = json.loads((report.path / "result.json").read_text())["context"]["hosts"]
    assert {h: g["queue"] for h, g in hosts["generators"].items()} == {"a": "loadgen_1", "b": "loadgen_2"}
    assert {g["status"] for g in hosts["generators"].values()} == {"ok"}
    assert "one generator per real host" in hosts["clock"]
    assert not (tmp_path / ".hosts" / run.run_id).exists()  # the rendezvous folder is gone once landed


def test_rtt_across_clock_domains(tmp_path: Path, console: Console) -> None:
    """Requesters on one host, responders on another with its own clock: rtt needs only the requester's."""
    cell = real_hosts_cell({"producers": ["a"], "consumers": ["b"]}, "rtt", hosts={"a": {}, "b": {}})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == 500
    assert 0 < report.analysis.metrics["rtt"]["intended"].percentiles["50"] < 50e6


def test_cross_domain_e2e_records_the_measured_offset(tmp_path: Path, console: Console) -> None:
    placement = {"producers": ["a"], "consumers": ["b"], "cross_host_clock": "measure_offset"}
    cell = real_hosts_cell(placement, hosts={"a": {"queue": "loadgen_1"}, "b": {"queue": "loadgen_2"}})
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    offsets = json.loads((report.path / "result.json").read_text())["context"]["hosts"]["clock_offsets"]
    assert [(o["from_host"], o["to_host"]) for o in offsets] == [("a", "b")]
    (offset,) = offsets
    assert "host clock" in offset["method"] and offset["exchanges"] > 0
    assert abs(offset["offset_ns"]) < 5_000_000  # one machine: the two host clocks agree to well under 5 ms


def test_a_failing_host_fails_the_cell_naming_it(tmp_path: Path, console: Console) -> None:
    """Host b gives up before the start: host a stops waiting at once, and land names both."""
    cell = real_hosts_cell({"producers": ["a", "b"], "consumers": ["a", "b"]})
    lake, run = Lake(tmp_path), RunInfo.new()
    folder, plan = lake.hosts_dir(run, cell.instance), resolve_placement(cell)
    brokers = provision_brokers(cell, plan, tmp_path / "brokers")
    try:
        publish_cell(folder, cell, plan, brokers.state())
        Rendezvous(folder, ("a", "b"), "b", cell.id).fail("its worker lost the broker")
        facts = run_host_part(folder, "a", tmp_path / "host-a", console)
    finally:
        brokers.stop()
    assert facts["status"] == "failed" and "host b failed: its worker lost the broker" in facts["reason"]
    collected = collect_parts(folder, cell, plan, tmp_path / "staging")
    assert collected.run is None  # nobody started the schedule
    assert collected.reason == "host a: " + facts["reason"]
    assert collected.generators["a"]["status"] == "failed"
    assert "status" not in collected.generators["b"]  # never reported
    record = json.loads((folder / "cell.json").read_text())
    assert "client" not in record["brokers"]  # no broker secrets in the lake


def test_a_cell_whose_broker_asks_for_a_password_runs_on_real_hosts(tmp_path: Path, console: Console) -> None:
    """A provisioned Redis asks for the cell's password: the hosts get it sealed through the lake, log in, and no
    file of the lake ever holds it."""
    workload = {
        "message_size_bytes": 256,
        "rate_per_s": 500,
        "warmup_s": 1,
        "measure_s": 1,
        "cooldown_s": 0.5,
        "max_schedule_lag_ms": 1000,
        "placement": {"producers": ["a"], "consumers": ["b"]},
    }
    raw = {
        "name": "itest_real_hosts_redis",
        "hosts": HOSTS,
        "systems": [{"system": "redis", "versions": ["latest"], "broker": {"server": {"requirepass": "h0sts-pw-1"}}}],
        "workload": workload,
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "itest_real_hosts_redis"))
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    assert [p for p in tmp_path.rglob("*") if p.is_file() and b"h0sts-pw-1" in p.read_bytes()] == []
