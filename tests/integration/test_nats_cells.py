"""Real cells against a real nats-server: every message accounted for, data landed as designed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.core.saturation import HARNESS_FACTS_VERSION
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.lake.records import SCHEMA_VERSION, read_schema_version
from bench_tasks.paths import cache_dir

from .helpers import ALL_PHASES_S, COOLDOWN_S, WARMUP_S, make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")


def _read(folder: Path, pattern: str):
    parts = [pq.read_table(p) for p in sorted(folder.glob(pattern))]
    assert parts, f"no {pattern} in {folder}"
    import pyarrow as pa

    return pa.concat_tables(parts)


def test_core_e2e_lands_every_sample(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", rate_per_s=1000, producers=2, consumers=2)
    run = RunInfo.new()
    report = run_cell(cell, Lake(tmp_path), run, console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == 1000  # 1000/s × 1 s measure, uniform: exact
    assert acc.sent == acc.received == 1000
    assert acc.lost == acc.duplicated == acc.send_errors == 0
    assert not (cache_dir() / "runs" / run.run_id).exists()  # the run's work folder went with its cell

    folder = report.path
    assert folder == Lake(tmp_path).cell_dir(run, cell.id)
    sent = _read(folder, "sent-p*.parquet")
    received = _read(folder, "received-c*.parquet")
    assert read_schema_version(folder / "sent-p0.parquet") == SCHEMA_VERSION
    assert sent.num_rows == 1000 * ALL_PHASES_S  # warmup and cooldown samples are landed too, tagged
    phases = dict(zip(*np.unique(sent["phase"].to_numpy(zero_copy_only=False), return_counts=True), strict=True))
    assert phases == {"warmup": 1000 * WARMUP_S, "measure": 1000, "cooldown": 1000 * COOLDOWN_S}
    assert received.num_rows == sent.num_rows
    assert set(received["consumer_id"].to_pylist()) <= {0, 1}
    # Response time can never be shorter than service time: intended <= sent <= received.
    assert pc.all(pc.less_equal(sent["intended_ns"], sent["sent_ns"])).as_py()
    assert pc.all(pc.less_equal(received["sent_ns"], received["received_ns"])).as_py()

    e2e = report.analysis.metrics["e2e"]
    assert e2e["intended"].count == 1000
    assert 0 < e2e["intended"].percentiles["50"] <= e2e["intended"].percentiles["99.9"] <= e2e["intended"].max_ns
    assert e2e["intended"].percentiles["99.99"] is None  # 1000 samples cannot support p99.99
    assert e2e["sent"].max_ns <= e2e["intended"].max_ns

    result = json.loads((folder / "result.json").read_text())
    assert result["context"]["broker"]["version"] == cell.spec.version
    assert result["context"]["host"]["cores"] >= 1
    assert "nats-py" in result["context"]["clients"]
    workers = result["harness"]["workers"]  # every worker says what its clients dropped and reported: nothing
    assert result["harness"]["schema_version"] == HARNESS_FACTS_VERSION and len(workers) == 4
    assert all(w["dropped"] == 0 and w["client_errors"]["count"] == 0 for w in workers.values()), workers
    assert (folder / "cell.hlog").read_text().count("Tag=e2e-intended,") >= 2  # a 1 s interval per second of 2
    cells = pq.read_table(Lake(tmp_path).cells_path(run)).to_pylist()
    assert [(c["cell_id"], c["status"], c["received"]) for c in cells] == [(cell.id, "ok", 1000)]


def test_jetstream_file_storage_acks_every_publish(tmp_path: Path, console: Console) -> None:
    broker = {"mode": "jetstream", "storage": "file", "sync_interval": "always"}
    cell = make_cell("publish", broker=broker, rate_per_s=300)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == 300
    assert acc.lost == 0
    assert set(report.analysis.metrics) == {"publish"}
    sent = _read(report.path, "sent-p*.parquet")
    offsets = sent.filter(pc.is_valid(sent["offset"]))["offset"].to_numpy()
    assert sorted(offsets.tolist()) == list(range(1, sent.num_rows + 1))  # stream sequence of each ack
    assert "sync_interval" in json.loads((report.path / "result.json").read_text())["context"]["broker"]["config"]


def test_jetstream_e2e_measures_delivery_and_ack(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", broker={"mode": "jetstream"}, rate_per_s=400)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == acc.acknowledged == 400
    assert acc.acknowledged_but_lost == 0
    assert set(report.analysis.metrics) == {"e2e", "publish"}
    received = _read(report.path, "received-c*.parquet")
    assert pc.all(pc.is_valid(received["offset"])).as_py()


def test_rtt_with_several_synchronous_connections(tmp_path: Path, console: Console) -> None:
    cell = make_cell("rtt", rate_per_s=400, connections=4, consumers=2)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)

    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == 400
    rtt = report.analysis.metrics["rtt"]
    assert rtt["intended"].count == 400
    assert rtt["sent"].percentiles["50"] <= rtt["intended"].percentiles["50"]


def test_a_release_built_from_source_runs_a_core_cell(tmp_path: Path, console: Console) -> None:
    """nats-server 2.1.2 has no wheel: the cell's release is built from the module proxy (cached after the first
    build), and the harness's client and driver work against it as against the newest."""
    cell = make_cell("e2e", version="2.1.2", rate_per_s=200)
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.received == 200 and acc.lost == acc.duplicated == 0
    context = json.loads((report.path / "result.json").read_text())["context"]["broker"]
    assert context["version"] == "2.1.2"
