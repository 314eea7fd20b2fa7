"""How soon after t0 does a fresh cell's latency settle? The evidence behind a matrix's `warmup_s`.

Runs one cell of the quick sweep's shape (1 KiB at 1,000 msg/s, e2e) with a long warmup, `--runs` times per broker
mode, on fresh brokers each time, and prints for every second from t0 the p99 and max of the response times
(from the intended send) of the messages meant in that second. A warmup need only cover the seconds that stand
apart from the rest. Writes bench/results/settling.json, with the load average before and after.

    .venv/bin/python bench/settling.py [--system nats] [--modes core jetstream] [--runs 3] [--seconds 11]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
from rich.console import Console

from bench_tasks import Lake, RunInfo, parse_matrix, prepare_cell, run_cell

RESULTS = Path(__file__).parent / "results" / "settling.json"
BROKERS = {"core": {"mode": "core"}, "jetstream": {"mode": "jetstream", "storage": "memory"}}


def one_cell(system: str, mode: str, seconds: int, lake: Path) -> dict[str, Any]:
    """One cell whose warmup is all but the last two of `seconds`; its status and per-second p99 and max (ms)."""
    matrix = {
        "name": "settling",
        "systems": [{"system": system, "versions": ["latest"], "broker": BROKERS.get(mode, {})}],
        "workload": {"message_size_bytes": 1024, "rate_per_s": 1000, "warmup_s": seconds - 2, "measure_s": 2},
        "measurements": ["e2e"],
    }
    (cell,) = parse_matrix(matrix, "settling").cells
    report = run_cell(prepare_cell(cell), Lake(lake), RunInfo.new(), Console(quiet=True))
    received = pq.read_table(sorted(report.path.glob("received-c*.parquet"))).to_pandas()
    intended, arrived = received["intended_ns"].to_numpy(), received["received_ns"].to_numpy()
    second = (intended - intended.min()) // 1_000_000_000
    per_second = []
    for s in range(int(second.max()) + 1):
        latency_ms = (arrived - intended)[second == s] / 1e6
        per_second.append(
            {
                "second": s,
                "p99_ms": round(float(np.percentile(latency_ms, 99)), 3),
                "max_ms": round(float(latency_ms.max()), 3),
            }
        )
    return {"mode": mode, "status": report.status, "per_second": per_second}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="nats")
    parser.add_argument("--modes", nargs="+", default=["core", "jetstream"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=11)
    args = parser.parse_args()
    load_before = os.getloadavg()
    cells = []
    with tempfile.TemporaryDirectory(prefix="settling-") as lake:
        for mode in args.modes:
            for _ in range(args.runs):
                cell = one_cell(args.system, mode, args.seconds, Path(lake))
                row = " ".join(f"{s['second']}:{s['p99_ms']:.2f}/{s['max_ms']:.1f}" for s in cell["per_second"])
                print(f"{args.system} {mode} {cell['status']}  second:p99/max ms  {row}", flush=True)
                cells.append(cell)
    RESULTS.parent.mkdir(exist_ok=True)
    result = {"system": args.system, "cells": cells, "load_before": load_before, "load_after": os.getloadavg()}
    RESULTS.write_text(json.dumps(result, indent=1))
    print(f"load {load_before[0]:.2f} -> {result['load_after'][0]:.2f}; wrote {RESULTS}")


if __name__ == "__main__":
    main()
