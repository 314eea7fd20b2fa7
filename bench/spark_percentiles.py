"""How fast is the Spark percentile job, and how compact is the raw Parquet it reads? (issue 5's benchmark)

The percentile job sorts every measure-phase sample of a cell exactly (no sketches), so its cost grows with the
raw data; this measures samples per second per core on this host, and bytes per sample of the raw files as the
harness writes them (zstd + delta encoding), to size lakes and Spark hosts. It also checks the job's exact
percentiles against numpy's `inverted_cdf` on one cell: the difference must be 0.

For each `--samples N` it lands N synthetic messages over `--cells` cells in the real lake layout with the
harness's own schemas and writers (tests/spark/synth.py: uniform-rate intended times, lognormal latencies with
a Pareto tail, warmup/measure/cooldown, a few losses and duplicates, half core NATS and half JetStream cells),
runs `spark_jobs.percentiles.run` in-process on it, and writes bench/results/spark_percentiles.json.

    .venv/bin/python bench/spark_percentiles.py --samples 10000000 [--samples 50000000] --cells 8 \\
        --workdir DIR [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from bench_tasks import PERCENTILES, Lake, RunInfo, required_samples
from spark_jobs import percentiles as job
from spark_jobs.exact import percentile_column
from spark_jobs.lakeio import find_run, table_dir
from spark_jobs.session import get_spark

# The synthetic-data builders live in tests/ (not installed): import them from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.spark.synth import SynthCell, received_table, sent_table, write_cell

RESULTS = Path(__file__).parent / "results" / "spark_percentiles.json"
RATE_PER_S = 50_000.0  # per cell: 1.25 M messages = 25 s of a cell at 10 M samples over 8 cells
PHASES = (0.05, 0.9, 0.05)  # warmup, measure, cooldown shares of each cell's messages
LOST_PER_CELL = 20
DUPLICATES_PER_CELL = 20
DRIVER_MEMORY = "8g"


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
    total_s = messages / RATE_PER_S
    rng = np.random.default_rng([seed, index, 1])
    lost = np.sort(rng.choice(messages, LOST_PER_CELL, replace=False)).tolist()
    return SynthCell(
        cell_id=f"cell-{index:02d}",
        mode="core" if index % 2 == 0 else "jetstream",
        rate_per_s=RATE_PER_S,
        warmup_s=total_s * PHASES[0],
        measure_s=total_s * PHASES[1],
        cooldown_s=total_s * PHASES[2],
        seed=seed * 1000 + index,
        lost=lost,
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


def max_relative_difference(lake: Path, landed: Landed) -> dict[str, Any]:
    """Largest |spark − numpy| / numpy over p50…p99.9999 and max, for cell 0's e2e rows (both bases)."""
    folder = table_dir(lake, "percentiles", find_run(lake, landed.run.run_id))
    table = pq.read_table(folder).to_pylist()
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
        "cpus_affinity": cores,
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


def bench_size(spark: Any, workdir: Path, samples: int, cells: int, cores: int, keep: bool, console: Console) -> dict:
    lake = workdir / f"lake-{samples}"
    shutil.rmtree(lake, ignore_errors=True)
    console.print(f"[bold]{samples:,} samples over {cells} cells[/] → {lake}")
    started = time.perf_counter()
    landed = land(lake, samples, cells, seed=samples % 9973, console=console)
    generate_s = time.perf_counter() - started
    started = time.perf_counter()
    job.run(spark, lake, [landed.run.run_id])
    wall_s = time.perf_counter() - started
    console.print(f"  generated in {generate_s:.1f} s, job took {wall_s:.1f} s")
    check = max_relative_difference(lake, landed)
    if not keep:
        shutil.rmtree(lake)
    return {
        "samples": landed.messages,
        "cells": cells,
        "cell_layout": landed.cells,
        "generate_seconds": round(generate_s, 2),
        "job_wall_seconds": round(wall_s, 2),
        "cores": cores,
        "samples_per_second_per_core": round(landed.messages / wall_s / cores),
        "raw_parquet_bytes": landed.raw_bytes,
        "bytes_per_sample": round(landed.raw_bytes / landed.messages, 3),
        "sent_bytes_per_sample": round(landed.sent_bytes / landed.messages, 3),
        "received_bytes_per_sample": round((landed.raw_bytes - landed.sent_bytes) / landed.messages, 3),
        "numpy_check": check,
        "lake": str(lake) if keep else None,
    }


def write_results(host: dict[str, Any], sizes: list[dict[str, Any]]) -> None:
    """Merge into earlier results: a size measured again (same samples and cells) replaces its old entry."""
    earlier: list[dict[str, Any]] = []
    if RESULTS.exists():
        earlier = json.loads(RESULTS.read_text()).get("sizes", [])
    fresh = {(s["samples"], s["cells"]) for s in sizes}
    merged = [s for s in earlier if (s["samples"], s["cells"]) not in fresh] + sizes
    merged.sort(key=lambda s: (s["samples"], s["cells"]))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": "spark_percentiles", "host": host, "sizes": merged}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, action="append", required=True, help="messages per run; repeatable")
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--keep", action="store_true", help="keep the generated lakes")
    args = parser.parse_args()
    console = Console()
    cores = len(os.sched_getaffinity(0))
    args.workdir.mkdir(parents=True, exist_ok=True)
    spark = get_spark("sixnines-bench-percentiles", f"local[{cores}]", {"spark.driver.memory": DRIVER_MEMORY})
    spark.sparkContext.setLogLevel("ERROR")
    try:
        # per core: the cores Spark may actually run tasks on (local[N] and this process's CPU affinity)
        cores = min(cores, spark.sparkContext.defaultParallelism)
        host = host_facts(spark, cores)
        sizes = [bench_size(spark, args.workdir, n, args.cells, cores, args.keep, console) for n in args.samples]
    finally:
        spark.stop()
    write_results(host, sizes)
    summary = Table("samples", "cells", "job s", "samples/s/core", "bytes/sample", "max rel diff vs numpy")
    for s in sizes:
        summary.add_row(
            f"{s['samples']:,}",
            str(s["cells"]),
            f"{s['job_wall_seconds']:.1f}",
            f"{s['samples_per_second_per_core']:,}",
            f"{s['bytes_per_sample']:.2f}",
            f"{s['numpy_check']['max_rel_diff']:g}",
        )
    console.print(summary)
    console.print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
