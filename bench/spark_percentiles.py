"""How fast are a run's analytics tables, and how compact is the raw Parquet they read? (issues 5 and 15)

The tables are exact (no sketches): their cost grows with the raw data. For each `--samples N` this lands N
synthetic messages over `--cells` cells in the real lake layout with the harness's own schemas and writers
(tests/spark/synth.py: uniform-rate intended times, lognormal latencies with a Pareto tail,
warmup/measure/cooldown, a few losses and duplicates, half core NATS and half JetStream cells), then runs the
sweep's own analysis in one Spark application — `spark_jobs.pipeline.run_analysis`: every table (accounting,
percentiles with leaders and repeats, timeline, histogram, a comparison along broker.mode), the Great
Expectations gate and publishing — and reports each step's wall time and messages per second per core.
It checks one cell's exact percentiles against numpy's `inverted_cdf`: the difference must be 0.

"Per core" divides by the cores Spark runs tasks on. The host is shared, so beside the wall-clock figure it
also reports the CPU seconds of Spark's JVMs and their Python workers, where spark_jobs.cellpass reads and
summarizes the samples (messages per CPU-second: what the work costs, whatever else ran), the highest peak
memory of a Python worker, and the load average before and after. Spark runs with its default driver memory
(1 GiB) unless `--driver-memory`.

    .venv/bin/python bench/spark_percentiles.py --samples 10000000 [--samples 50000000] --cells 8 \\
        --workdir DIR [--keep] [--workers 2]

`--workers N` runs the same on a standalone cluster of N workers of one core each on this host (the test
setup of tests/spark_cluster.py); results go to bench/results/spark_percentiles[_cluster].json. `--s3` starts
moto's S3 server on loopback, uploads each lake to a bucket as landing leaves it, and reports three places side
by side: the local lake and the S3 lake on local[*], and the S3 lake on a cluster of two 1-core workers
(each size's `places`, and `place_to_local`: each place's messages/s/core over the local lake's).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import psutil
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

# This checkout first: the jobs measured are its own, not those of whichever checkout the venv installed; the
# synthetic-data builders and the test cluster live in its tests/ (not installed).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_tasks import PERCENTILES, Lake, RunInfo, S3Path, S3Settings, required_samples
from spark_jobs.exact import percentile_column
from spark_jobs.lakeio import find_run, table_rows
from spark_jobs.pipeline import Comparison, run_analysis
from spark_jobs.session import get_spark
from tests.s3.conftest import moto_server, upload_run
from tests.spark.synth import SynthCell, received_table, sent_table, write_cell
from tests.spark_cluster import standalone_cluster

RESULTS = Path(__file__).parent / "results"
RATE_PER_S = 50_000.0  # per cell: 1.25 M messages = 25 s of a cell at 10 M samples over 8 cells
PHASES = (0.05, 0.9, 0.05)  # warmup, measure, cooldown shares of each cell's messages
LOST_PER_CELL = 20  # in each core cell
ALLOWED_LOSS_RATIO = 0.001
DUPLICATES_PER_CELL = 20
# The steps whose wall seconds make "all tables": the passes, every table built, collected and written (several
# at once: the per-table seconds also reported overlap) and the comparison. Building the tables' plans counts in
# "write tables" (results before that change left ~2.4 s of a 10 M run on a slow day of this host uncounted).
TABLE_STEPS = ("passes", "write tables", "compare broker.mode")


@dataclass
class Landed:
    """What one size landed: the run, message count and raw bytes, and cell 0's expected samples."""

    run: RunInfo
    messages: int
    raw_bytes: int
    sent_bytes: int  # sent-p*.parquet alone (received-c*.parquet: raw_bytes - sent_bytes)
    expected: dict[str, np.ndarray]  # basis -> cell 0's measure-phase e2e latencies (first receipts)
    cells: list[dict[str, Any]]


def synth_cell(index: int, messages: int, seed: int) -> SynthCell:
    """Even cells core NATS (which may lose a few messages: LOST_PER_CELL, within the cell's allowance, so
    the gate passes and publishing is measured too), odd cells JetStream (which must not)."""
    total_s = messages / RATE_PER_S
    rng = np.random.default_rng([seed, index, 1])
    core = index % 2 == 0
    lost = np.sort(rng.choice(messages, LOST_PER_CELL, replace=False)).tolist() if core else []
    return SynthCell(
        cell_id=f"cell-{index:02d}",
        mode="core" if core else "jetstream",
        rate_per_s=RATE_PER_S,
        warmup_s=total_s * PHASES[0],
        measure_s=total_s * PHASES[1],
        cooldown_s=total_s * PHASES[2],
        seed=seed * 1000 + index,
        lost=lost,
        allowed_loss_ratio=ALLOWED_LOSS_RATIO,
    )


def with_duplicates(received: pa.Table, seed: int) -> pa.Table:
    """A few messages received a second time 1 ms later (a redelivery): they must count once, at first receipt."""
    rng = np.random.default_rng([seed, 2])
    rows = np.sort(rng.choice(received.num_rows, DUPLICATES_PER_CELL, replace=False))
    dup = received.take(pa.array(rows))
    later = pc.add(dup["received_ns"], pa.scalar(1_000_000, pa.int64()))
    dup = dup.set_column(dup.schema.get_field_index("received_ns"), "received_ns", later)
    return pa.concat_tables([received, dup])


def expected_samples(cell: SynthCell, received: pa.Table) -> dict[str, np.ndarray]:
    """Cell 0's e2e samples the job must summarize: measure phase, the original receipt of each message."""
    original = received.slice(0, received.num_rows - DUPLICATES_PER_CELL)
    measure = original.filter(pc.equal(original["phase"], "measure"))
    done = measure["received_ns"].to_numpy()
    return {
        "intended": done - measure["intended_ns"].to_numpy(),
        "sent": done - measure["sent_ns"].to_numpy(),
    }


def land(lake: Path, samples: int, cells: int, seed: int, console: Console) -> Landed:
    run = RunInfo(run_id=f"bench-{samples}", run_date="2026-01-02")
    per_cell = [samples // cells + (1 if i < samples % cells else 0) for i in range(cells)]
    expected: dict[str, np.ndarray] = {}
    described: list[dict[str, Any]] = []
    messages = 0
    for index, n in enumerate(per_cell):
        cell = synth_cell(index, n, seed)
        sent = sent_table(cell, 0, acked=cell.mode == "jetstream")
        received = with_duplicates(received_table(cell, sent), cell.seed)
        if index == 0:
            expected = expected_samples(cell, received)
        write_cell(lake, run, cell, received=received, sent=[sent])
        messages += sent.num_rows
        described.append(
            {"cell_id": cell.cell_id, "mode": cell.mode, "messages": sent.num_rows, "received_rows": received.num_rows}
        )
        console.print(f"  landed {cell.cell_id} ({cell.mode}, {sent.num_rows:,} messages)")
    folder = Lake(lake).cell_dir(run, "x").parent
    raw_bytes = sum(p.stat().st_size for p in folder.rglob("*.parquet"))
    sent_bytes = sum(p.stat().st_size for p in folder.rglob("sent-p*.parquet"))
    return Landed(run, messages, raw_bytes, sent_bytes, expected, described)


def max_relative_difference(lake: Any, landed: Landed) -> dict[str, Any]:
    """Largest |spark − numpy| / numpy over p50…p99.9999 and max, for cell 0's e2e rows (both bases)."""
    table = table_rows(lake, "percentiles", find_run(lake, landed.run.run_id)).to_pylist()
    worst = 0.0
    checked: dict[str, dict[str, Any]] = {}
    for basis, values in landed.expected.items():
        (row,) = [
            r
            for r in table
            if r["cell_id"] == "cell-00" and r["metric"] == "e2e" and r["basis"] == basis and r["leader"] is None
        ]
        want = {
            percentile_column(p): float(np.percentile(values, float(p), method="inverted_cdf")) for p in PERCENTILES
        }
        want["max_ns"] = float(values.max())
        # a percentile the count cannot support must be null in Spark (and is not compared)
        unsupported = [p for p in PERCENTILES if values.size < required_samples(p)]
        if sorted(row["unsupported"]) != sorted(unsupported):
            raise SystemExit(f"unsupported percentiles differ: spark {row['unsupported']}, expected {unsupported}")
        for p in unsupported:
            del want[percentile_column(p)]
        diffs = {k: abs(float(row[k]) - v) / v for k, v in want.items()}
        worst = max(worst, *diffs.values())
        checked[basis] = {
            "count_spark": row["count"],
            "count_numpy": int(values.size),
            "compared": sorted(want),
            "unsupported": unsupported,
            "max_rel_diff": max(diffs.values()),
        }
    return {"cell_id": "cell-00", "metric": "e2e", "bases": checked, "max_rel_diff": worst}


def host_facts(spark: Any, cores: int) -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), "")
    mem_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    jvm = spark.sparkContext._jvm.java.lang.System
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus_online": os.cpu_count(),
        "spark_cores": cores,
        "memory_gib": round(mem_kib / 2**20, 1),
        "python": platform.python_version(),
        "pyspark": spark.version,
        "java": jvm.getProperty("java.version"),
        "numpy": np.__version__,
        "pyarrow": pa.__version__,
        "spark_master": spark.sparkContext.master,
        "spark_default_parallelism": spark.sparkContext.defaultParallelism,
        "spark_shuffle_partitions": spark.conf.get("spark.sql.shuffle.partitions"),
        "spark_driver_memory": spark.conf.get("spark.driver.memory"),
        "jvm_max_heap_gib": round(spark.sparkContext._jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**30, 2),
    }


class SparkCpu:
    """CPU seconds of the Spark JVMs on this host and of their Python workers (spark_jobs.cellpass runs its
    tasks there): the driver (a child of this process) and, on a local standalone cluster, the executors
    (children of the workers)."""

    def __init__(self, extra_roots: list[int] | None = None):
        self.roots = [psutil.Process(), *[psutil.Process(pid) for pid in extra_roots or []]]

    def _spark(self) -> list[psutil.Process]:
        """Every JVM under the roots, and every process under those (the Python daemon and its workers)."""
        found: dict[int, psutil.Process] = {}  # by pid: a cluster's executor JVM is also under its worker's
        for root in self.roots:
            for proc in root.children(recursive=True):
                try:
                    if "java" in proc.name():
                        found |= {p.pid: p for p in (proc, *proc.children(recursive=True))}
                except psutil.NoSuchProcess:
                    continue
        return list(found.values())

    def seconds(self) -> float:
        """User and system seconds, with those of exited children their parents reaped."""
        total = 0.0
        for proc in self._spark():
            try:
                times = proc.cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
            except psutil.NoSuchProcess:
                continue
        return total

    def python_peak_rss_mib(self) -> float | None:
        """The highest peak resident memory (VmHWM) of the Spark Python workers alive now (workers are
        reused, so those that ran the tasks)."""
        peaks = []
        for proc in self._spark():
            try:
                if "python" in proc.name():
                    status = Path(f"/proc/{proc.pid}/status").read_text()
                    peaks.append(int(next(ln for ln in status.splitlines() if ln.startswith("VmHWM:")).split()[1]))
            except (psutil.NoSuchProcess, FileNotFoundError, StopIteration):
                continue
        return round(max(peaks) / 1024, 1) if peaks else None


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def analyse(spark: Any, lake: Any, landed: Landed, cores: int, cpu: SparkCpu, console: Console) -> dict[str, Any]:
    """One analysis of a landed run in `lake` (a folder or an S3Path): each step's seconds, messages/s/core, the
    CPU seconds of Spark's processes, a Python worker's peak memory, the load before and after, and the check
    against numpy."""
    load_before, cpu_before = _load(), cpu.seconds()
    timings: dict[str, float] = {}
    started = time.perf_counter()
    run_analysis(spark, lake, landed.run.run_id, comparisons=[Comparison("broker.mode")], timings=timings)
    wall_s = time.perf_counter() - started
    cpu_s = cpu.seconds() - cpu_before
    tables_s = sum(timings[step] for step in TABLE_STEPS)
    console.print(f"  {lake}: all tables {tables_s:.1f} s, with gate and publish {wall_s:.1f} s")
    per_core = {name: round(landed.messages / seconds / cores) for name, seconds in timings.items() if seconds > 0}
    return {
        "step_seconds": timings,
        "step_messages_per_second_per_core": per_core,
        "tables_seconds": round(tables_s, 2),
        "analysis_wall_seconds": round(wall_s, 2),
        "cores": cores,
        "messages_per_second_per_core": round(landed.messages / tables_s / cores),
        "messages_per_second_per_core_with_gate": round(landed.messages / wall_s / cores),
        "spark_cpu_seconds": round(cpu_s, 1),
        "messages_per_cpu_second": round(landed.messages / cpu_s) if cpu_s > 0 else None,
        "python_worker_peak_rss_mib": cpu.python_peak_rss_mib(),
        "load_before": load_before,
        "load_after": _load(),
        "numpy_check": max_relative_difference(lake, landed),
    }


def land_size(workdir: Path, samples: int, cells: int, console: Console) -> tuple[Path, Landed, float]:
    """A size's synthetic run landed in a fresh local lake: (the lake, what landed, seconds it took)."""
    lake = workdir / f"lake-{samples}"
    shutil.rmtree(lake, ignore_errors=True)
    console.print(f"[bold]{samples:,} samples over {cells} cells[/] → {lake}")
    started = time.perf_counter()
    landed = land(lake, samples, cells, seed=samples % 9973, console=console)
    return lake, landed, time.perf_counter() - started


def size_facts(landed: Landed, cells: int, generate_s: float) -> dict[str, Any]:
    return {
        "samples": landed.messages,
        "cells": cells,
        "cell_layout": landed.cells,
        "generate_seconds": round(generate_s, 2),
        "raw_parquet_bytes": landed.raw_bytes,
        "bytes_per_sample": round(landed.raw_bytes / landed.messages, 3),
        "sent_bytes_per_sample": round(landed.sent_bytes / landed.messages, 3),
        "received_bytes_per_sample": round((landed.raw_bytes - landed.sent_bytes) / landed.messages, 3),
    }


def bench_size(
    spark: Any, workdir: Path, samples: int, cells: int, cores: int, cpu: SparkCpu, keep: bool, console: Console
) -> dict:
    lake, landed, generate_s = land_size(workdir, samples, cells, console)
    console.print(f"  generated in {generate_s:.1f} s")
    figures = analyse(spark, lake, landed, cores, cpu, console)
    if not keep:
        shutil.rmtree(lake)
    return {**size_facts(landed, cells, generate_s), **figures, "lake": str(lake) if keep else None}


def write_results(path: Path, host: dict[str, Any], sizes: list[dict[str, Any]]) -> None:
    """Merge into earlier results: a size measured again (same samples and cells) replaces its old entry."""
    earlier: list[dict[str, Any]] = []
    if path.exists():
        earlier = json.loads(path.read_text()).get("sizes", [])
    fresh = {(s["samples"], s["cells"]) for s in sizes}
    merged = [s for s in earlier if (s["samples"], s["cells"]) not in fresh] + sizes
    merged.sort(key=lambda s: (s["samples"], s["cells"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": "spark_percentiles", "schema_version": 2, "host": host, "sizes": merged}
    path.write_text(json.dumps(document, indent=2) + "\n")


def summary_table(sizes: list[dict[str, Any]]) -> Table:
    table = Table(
        "messages", "all tables s", "msg/s/core", "+gate+publish s", "msg/CPU-s", "worker MiB", "load", "rel diff"
    )
    for s in sizes:
        table.add_row(
            f"{s['samples']:,}",
            f"{s['tables_seconds']:.1f}",
            f"{s['messages_per_second_per_core']:,}",
            f"{s['analysis_wall_seconds']:.1f}",
            f"{s['messages_per_cpu_second'] or 0:,}",
            f"{s.get('python_worker_peak_rss_mib') or '-'}",
            f"{s['load_before'][0]:.1f} → {s['load_after'][0]:.1f}",
            f"{s['numpy_check']['max_rel_diff']:g}",
        )
    return table


def steps_table(sizes: list[dict[str, Any]]) -> Table:
    table = Table("step", *[f"{s['samples']:,}: s (msg/s/core)" for s in sizes])
    for step in sizes[0]["step_seconds"]:
        table.add_row(
            step,
            *[
                f"{s['step_seconds'].get(step, 0):.2f} ({s['step_messages_per_second_per_core'].get(step, 0):,})"
                for s in sizes
            ],
        )
    return table


PLACES = ("local", "s3", "cluster_s3")  # --s3: local lake, S3 lake (both local[*]), S3 lake on a 2-worker cluster
CLUSTER_WORKERS = 2
WARMUP_PER_CELL = 50_000  # fewer would leave LOST_PER_CELL over a core cell's loss allowance


def bench_places(args: argparse.Namespace, conf: dict[str, str], console: Console) -> tuple[dict, list[dict]]:
    """--s3: every size landed locally and uploaded to a bucket of a moto server started here, then analysed
    three ways: the S3 lake, then the local lake, by one local[*] session, then the S3 lake by a session on a
    standalone cluster of two 1-core workers. Each session first analyses a small run (WARMUP_PER_CELL a cell, not
    reported) in each of its places, so no place bears the first actions of a JVM or a Python worker. The S3
    settings reach Spark and the tasks only through the lake's S3Path, never the environment (workers inherit it)."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, like the cluster, on loopback only
    sizes: dict[int, dict[str, Any]] = {}
    with ExitStack() as stack:
        endpoint = stack.enter_context(moto_server())
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        keys = {"aws_access_key_id": "bench", "aws_secret_access_key": "bench-secret"}
        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **keys).create_bucket(Bucket=bucket)
        remote = S3Path(f"{bucket}/lake", S3Settings("bench", "bench-secret", None, endpoint, "us-east-1"))
        runs: dict[int, tuple[Path, Landed]] = {}
        warmup = WARMUP_PER_CELL * args.cells
        for n in [warmup, *args.samples]:
            lake, landed, generate_s = land_size(args.workdir, n, args.cells, console)
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(dir=args.workdir) as staging:
                upload_run(lake, remote, landed.run, Path(staging))
            console.print(f"  generated in {generate_s:.1f} s, uploaded in {time.perf_counter() - started:.1f} s")
            runs[n] = (lake, landed)
            sizes[n] = {**size_facts(landed, args.cells, generate_s), "s3_endpoint": endpoint, "places": {}}
        (warm_lake, warm), _ = runs.pop(warmup), sizes.pop(warmup)
        cores = len(os.sched_getaffinity(0))
        spark = get_spark("sixnines-bench-percentiles", f"local[{cores}]", conf, lake=remote)
        spark.sparkContext.setLogLevel("ERROR")
        cores = min(cores, spark.sparkContext.defaultParallelism)
        host = host_facts(spark, cores)
        cpu = SparkCpu()
        for where in (remote, warm_lake):
            run_analysis(spark, where, warm.run.run_id)
        for n, (lake, landed) in runs.items():
            sizes[n]["places"]["s3"] = analyse(spark, remote, landed, cores, cpu, console)
            sizes[n]["places"]["local"] = analyse(spark, lake, landed, cores, cpu, console)
        spark.stop()
        cluster = stack.enter_context(standalone_cluster(args.workdir / "spark", workers=CLUSTER_WORKERS, cores=1))
        cluster_conf = {**conf, "spark.cores.max": str(CLUSTER_WORKERS)}
        spark = get_spark("sixnines-bench-percentiles", cluster.master_url, cluster_conf, lake=remote)
        spark.sparkContext.setLogLevel("ERROR")
        stack.callback(spark.stop)
        host["cluster"] = {"master": cluster.master_url, "workers": CLUSTER_WORKERS, "cores_per_worker": 1}
        cpu = SparkCpu([d.popen.pid for d in cluster.daemons])
        run_analysis(spark, remote, warm.run.run_id)
        for n, (_, landed) in runs.items():
            sizes[n]["places"]["cluster_s3"] = analyse(spark, remote, landed, CLUSTER_WORKERS, cpu, console)
        for lake in [warm_lake, *(r[0] for r in runs.values())] if not args.keep else []:
            shutil.rmtree(lake)
    out = []
    for entry in sizes.values():
        places = entry["places"]
        local = places["local"]["messages_per_second_per_core"]
        ratios = {p: round(places[p]["messages_per_second_per_core"] / local, 3) for p in PLACES[1:]}
        out.append({**entry, **places["local"], "place_to_local": ratios})  # the top level: the local lake's
    return host, out


def places_table(sizes: list[dict[str, Any]]) -> Table:
    table = Table("messages", "place", "all tables s", "msg/s/core", "× local", "+gate+publish s", "msg/CPU-s", "load")
    for s in sizes:
        for place in PLACES:
            p = s["places"][place]
            table.add_row(
                f"{s['samples']:,}",
                place,
                f"{p['tables_seconds']:.1f}",
                f"{p['messages_per_second_per_core']:,}",
                f"{s['place_to_local'].get(place, 1.0):.2f}",
                f"{p['analysis_wall_seconds']:.1f}",
                f"{p['messages_per_cpu_second'] or 0:,}",
                f"{p['load_before'][0]:.1f} → {p['load_after'][0]:.1f}",
            )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, action="append", required=True, help="messages per run; repeatable")
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--keep", action="store_true", help="keep the generated lakes")
    parser.add_argument("--workers", type=int, default=0, help="run on a local standalone cluster of N 1-core workers")
    parser.add_argument("--driver-memory", default=None, help="Spark driver memory (default: Spark's, 1 GiB)")
    parser.add_argument(
        "--s3", action="store_true", help="also an S3 lake (moto's server), local[*] and on a 2-worker cluster"
    )
    args = parser.parse_args()
    if args.s3 and args.workers:
        parser.error("--s3 runs its own 2-worker cluster: no --workers")
    console = Console()
    args.workdir.mkdir(parents=True, exist_ok=True)
    conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
    if args.s3:
        host, sizes = bench_places(args, conf, console)
        write_results(RESULTS / "spark_percentiles.json", host, sizes)
        console.print(places_table(sizes))
        console.print(f"wrote {RESULTS / 'spark_percentiles.json'}")
        return
    with ExitStack() as stack:
        if args.workers:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver, like the cluster, on loopback only
            cluster = stack.enter_context(standalone_cluster(args.workdir / "spark", workers=args.workers, cores=1))
            master, roots = cluster.master_url, [d.popen.pid for d in cluster.daemons]
            cores = args.workers
            conf["spark.cores.max"] = str(cores)
        else:
            cores = len(os.sched_getaffinity(0))
            master, roots = f"local[{cores}]", []
        spark = get_spark("sixnines-bench-percentiles", master, conf)
        spark.sparkContext.setLogLevel("ERROR")
        stack.callback(spark.stop)
        cores = min(cores, spark.sparkContext.defaultParallelism) if not args.workers else cores
        host = host_facts(spark, cores)
        cpu = SparkCpu(roots)
        sizes = [bench_size(spark, args.workdir, n, args.cells, cores, cpu, args.keep, console) for n in args.samples]
    path = RESULTS / ("spark_percentiles_cluster.json" if args.workers else "spark_percentiles.json")
    write_results(path, host, sizes)
    console.print(summary_table(sizes))
    console.print(steps_table(sizes))
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
