"""OMB in, OMB and HdrHistogram out, on a real broker: an OMB workload (with OMB's NATS driver) is imported
with the CLI, validated, run as a short JetStream cell on a real nats-server over loopback, then exported;
the OMB results and `.hgrm` files are read back and checked against the run's own tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.interop.hgrm import parse_hgrm
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import load_matrix

from .helpers import make_cell

pytestmark = pytest.mark.usefixtures("no_orphans")

# Written from OMB's documented Workload fields, in the shape of its 1-topic workloads.
WORKLOAD = """\
name: 1 topic / 1 partition / 256b
topics: 1
partitionsPerTopic: 1
keyDistributor: "NO_KEY"
messageSize: 256
useRandomizedPayloads: true
randomBytesRatio: 1.0
randomizedPayloadPoolSize: 100
subscriptionsPerTopic: 1
consumerPerSubscription: 1
producersPerTopic: 1
producerRate: 400
consumerBacklogSizeGB: 0
testDurationMinutes: 15
"""
# OMB's NATS driver config fields (its NatsBenchmarkDriver uses JetStream).
NATS_DRIVER = """\
name: NATS
driverClass: io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver
natsHostUrl: localhost:4222
replicationFactor: 1
storageType: Memory
"""


def sixnines(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SIXNINES_LAKE"}
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_imported_workload_runs_and_exports(tmp_path: Path, console: Console) -> None:
    (tmp_path / "workload.yaml").write_text(WORKLOAD)
    (tmp_path / "nats.yaml").write_text(NATS_DRIVER)
    matrix = tmp_path / "matrix.yaml"
    imported = sixnines(
        "import", "omb", str(tmp_path / "workload.yaml"), "--driver", str(tmp_path / "nats.yaml"),
        "-o", str(matrix), "--warmup-s", "1", "--measure-s", "1",
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    assert sixnines("cells", str(matrix)).returncode == 0  # validated as any matrix file

    (cell,) = select_cells(load_matrix(matrix))
    spec = cell.spec
    assert (spec.system, spec.broker.mode, spec.broker.storage, spec.measurement) == (
        "nats",
        "jetstream",
        "memory",
        "e2e",
    )
    assert (spec.workload.rate_per_s, spec.workload.message_size_bytes, spec.workload.measure_s) == (400, 256, 1)

    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    report = run_cell(cell, lake, run, console)
    assert report.status == "ok", report.reason
    result = json.loads((report.path / "result.json").read_text())
    assert result["origin"]["workload_name"] == "1 topic / 1 partition / 256b"  # the mapping travels with the cell
    backlog = result["backlog"]  # what OMB's max-rate search judges a rate by: sent and not yet received
    assert 1 <= backlog["percentiles_messages"]["99.9"] <= backlog["max_messages"] <= result["accounting"]["sent"]

    omb = _export_omb(tmp_path, lake, cell.id)
    _check_against_tables(omb, lake, run, result)
    _check_hgrm(tmp_path, lake, cell.id, result)


def _export_omb(tmp_path: Path, lake: Lake, cell_id: str) -> dict:
    done = sixnines("export", "omb", "--latest", "--lake", str(lake.root), "--out", str(tmp_path / "omb"))
    assert done.returncode == 0, done.stderr
    omb = json.loads((tmp_path / "omb" / f"{cell_id}.json").read_text())
    sidecar = json.loads((tmp_path / "omb" / "sixnines" / f"{cell_id}.json").read_text())
    assert "service times" in sidecar["note"] and sidecar["cell_id"] == cell_id
    assert omb["workload"] == "1 topic / 1 partition / 256b"  # charts beside OMB's own results of this workload
    return omb | {"_sidecar": sidecar}


def _check_against_tables(omb: dict, lake: Lake, run: RunInfo, result: dict) -> None:
    """Every aggregated OMB figure equals the run's own exact tables (result.json and the cells table)."""
    metrics = result["metrics"]
    for prefix, metric in (("aggregatedEndToEndLatency", "e2e"), ("aggregatedPublishLatency", "publish")):
        service = metrics[metric]["sent"]  # OMB measures from the actual send
        assert omb[f"{prefix}50pct"] == service["percentiles_ns"]["50"] / 1e6
        assert omb[f"{prefix}99pct"] == service["percentiles_ns"]["99"] / 1e6
        assert omb[f"{prefix}999pct"] is None  # 400 samples cannot state p99.9
        assert omb[f"{prefix}Max"] == service["max_ns"] / 1e6
        assert omb[f"{prefix}Quantiles"]["100.0"] == service["max_ns"] / 1e6
        response = omb["_sidecar"]["latency_ms"][metric]["response"]
        assert response["max"] == metrics[metric]["intended"]["max_ns"] / 1e6
    lag = result["generator"]["schedule_lag"]
    assert omb["aggregatedPublishDelayLatencyMax"] == lag["max_ns"] // 1000  # µs, as OMB's integers
    row = pq.read_table(lake.cells_path(run)).to_pylist()[0]
    assert json.loads(row["results_json"])["metrics"] == metrics  # the cells table holds the same figures
    assert len(omb["publishRate"]) == 1  # a 1 s measure phase is one (short) 10 s interval
    assert omb["publishRate"][0] == pytest.approx(400, rel=0.1)
    assert omb["consumeRate"][0] == pytest.approx(400, rel=0.1)
    assert omb["publishErrorRate"] == [0.0]


def _check_hgrm(tmp_path: Path, lake: Lake, cell_id: str, result: dict) -> None:
    done = sixnines("export", "hgrm", "--latest", "--lake", str(lake.root), "--out", str(tmp_path / "hgrm"))
    assert done.returncode == 0, done.stderr
    for metric in ("e2e", "publish"):
        for basis, name in (("intended", "response"), ("sent", "service")):
            parsed = parse_hgrm((tmp_path / "hgrm" / cell_id / f"{metric}-{name}.hgrm").read_text())
            summary = result["metrics"][metric][basis]
            assert parsed.total_count == summary["count"] == 400
            top = summary["max_ns"] / 1e6  # printed: its HDR bucket's top (< 1/1024 above), to 3 decimals of a ms
            assert parsed.max == pytest.approx(top, abs=top / 1024 + 0.5e-3)
            assert parsed.mean == pytest.approx(summary["mean_ns"] / 1e6, rel=1e-2)
            p99 = summary["percentiles_ns"]["99"] / 1e6
            at = min((r for r in parsed.rows if r.percentile >= 0.99), key=lambda r: r.percentile)
            below = max((r for r in parsed.rows if r.percentile < 0.99), key=lambda r: r.percentile)
            printed = 0.5e-3  # values are printed in ms to 3 places (3 significant digits): ±0.0005 ms
            assert below.value * (1 - 1e-3) - printed <= p99 <= at.value * (1 + 1e-3) + printed


def test_cli_refuses_what_it_cannot_import_naming_file_and_field(tmp_path: Path) -> None:
    workload = tmp_path / "tiny-backlog.yaml"  # a message smaller than the header, a backlog NATS cannot build
    refused = WORKLOAD.replace("messageSize: 256", "messageSize: 10")
    workload.write_text(refused.replace("consumerBacklogSizeGB: 0", "consumerBacklogSizeGB: 1"))
    undecided = sixnines("import", "omb", str(workload))
    said = " ".join(undecided.stderr.split())  # the console wraps long lines
    assert undecided.returncode == 2 and "no system given: give --driver, or --system one of" in said
    done = sixnines("import", "omb", str(workload), "--system", "nats")
    assert done.returncode == 2
    assert f"{workload}: messageSize: 10" in done.stderr and "consumerBacklogSizeGB: 1" in done.stderr
    assert "Traceback" not in done.stderr
    missing = sixnines("export", "omb", "no-such-run", "--lake", str(tmp_path / "lake"))
    assert missing.returncode == 2 and "no run 'no-such-run' in the lake" in missing.stderr
    both = sixnines("export", "hgrm", "r1", "--latest", "--lake", str(tmp_path / "lake"))
    assert both.returncode == 2 and "not both" in both.stderr


# OMB's TestResult, declared here from its documented format (field names and Java types) so Jackson — the
# library OMB reads results with, default settings: unknown fields are an error — reads our files as OMB would.
TEST_RESULT_JAVA = """
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.util.*;

public class ReadResult {
    public static class TestResult {
        public String workload; public String driver; public long messageSize; public int topics;
        public int partitions; public int producersPerTopic; public int consumersPerTopic;
        public List<Double> publishRate, publishErrorRate, consumeRate; public List<Long> backlog;
        public List<Double> publishLatencyAvg, publishLatency50pct, publishLatency75pct, publishLatency95pct,
            publishLatency99pct, publishLatency999pct, publishLatency9999pct, publishLatencyMax;
        public List<Double> publishDelayLatencyAvg;
        public List<Long> publishDelayLatency50pct, publishDelayLatency75pct, publishDelayLatency95pct,
            publishDelayLatency99pct, publishDelayLatency999pct, publishDelayLatency9999pct, publishDelayLatencyMax;
        public double aggregatedPublishLatencyAvg, aggregatedPublishLatency50pct, aggregatedPublishLatency75pct,
            aggregatedPublishLatency95pct, aggregatedPublishLatency99pct, aggregatedPublishLatency999pct,
            aggregatedPublishLatency9999pct, aggregatedPublishLatencyMax;
        public double aggregatedPublishDelayLatencyAvg;
        public long aggregatedPublishDelayLatency50pct, aggregatedPublishDelayLatency75pct,
            aggregatedPublishDelayLatency95pct, aggregatedPublishDelayLatency99pct, aggregatedPublishDelayLatency999pct,
            aggregatedPublishDelayLatency9999pct, aggregatedPublishDelayLatencyMax;
        public Map<Double, Double> aggregatedPublishLatencyQuantiles;
        public Map<Double, Long> aggregatedPublishDelayLatencyQuantiles;
        public List<Double> endToEndLatencyAvg, endToEndLatency50pct, endToEndLatency75pct, endToEndLatency95pct,
            endToEndLatency99pct, endToEndLatency999pct, endToEndLatency9999pct, endToEndLatencyMax;
        public Map<Double, Double> aggregatedEndToEndLatencyQuantiles;
        public double aggregatedEndToEndLatencyAvg, aggregatedEndToEndLatency50pct, aggregatedEndToEndLatency75pct,
            aggregatedEndToEndLatency95pct, aggregatedEndToEndLatency99pct, aggregatedEndToEndLatency999pct,
            aggregatedEndToEndLatency9999pct, aggregatedEndToEndLatencyMax;
    }

    public static void main(String[] args) throws Exception {
        TestResult r = new ObjectMapper().readValue(new File(args[0]), TestResult.class);
        System.out.println(r.workload + "|" + r.aggregatedEndToEndLatency50pct + "|" + r.aggregatedEndToEndLatencyMax
            + "|" + r.aggregatedEndToEndLatencyQuantiles.get(100.0) + "|" + r.backlog + "|" + r.publishRate.size());
    }
}
"""


def test_omb_java_reader_reads_the_export(tmp_path: Path, console: Console) -> None:
    """An exported result of a real cell read by Jackson into OMB's TestResult (Jackson from the Kafka release
    the harness runs, fetched from Maven Central)."""
    from bench_tasks.systems import resolve_version
    from bench_tasks.systems.kafka.release import kafka_classpath

    cell = make_cell("e2e", broker={"mode": "jetstream"}, rate_per_s=300, measure_s=1)
    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    report = run_cell(cell, lake, run, console)
    assert report.status == "ok", report.reason
    assert (
        sixnines("export", "omb", run.run_id, "--lake", str(lake.root), "--out", str(tmp_path / "omb")).returncode == 0
    )
    exported = json.loads((tmp_path / "omb" / f"{cell.id}.json").read_text())

    (tmp_path / "ReadResult.java").write_text(TEST_RESULT_JAVA)
    classpath = f"{kafka_classpath(resolve_version('kafka', 'latest'))}/*"
    subprocess.run(["javac", "-cp", classpath, "ReadResult.java"], cwd=tmp_path, check=True, timeout=120)
    done = subprocess.run(
        ["java", "-cp", f"{classpath}:{tmp_path}", "ReadResult", str(tmp_path / "omb" / f"{cell.id}.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    workload, p50, top, q100, backlog, intervals = done.stdout.strip().split("|")
    assert workload == exported["workload"]
    assert float(p50) == exported["aggregatedEndToEndLatency50pct"]
    assert float(top) == float(q100) == exported["aggregatedEndToEndLatencyMax"]
    assert backlog == "[" + ", ".join(map(str, exported["backlog"])) + "]" and intervals == "1"  # Java's List
