"""What the worker contract costs (docs/workers.md, "Figures"): a JVM worker's start until `ready` and its stop
until `done` (which includes writing its sample file), the bridge's cost per progress event, and the conversion of
a sample file to the lake's Parquet file, against writing the same rows as Parquet directly (a Python receiver's
way). Prints JSON with the host load beside every figure.

    .venv/bin/python bench/worker_contract.py [--rows 1000000] [--starts 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_tasks import (
    RECEIVED_SCHEMA,
    RECEIVER_WRITE_ROWS,
    PhasePlan,
    convert_sample_file,
    decode_event,
    plan_keys,
    received_table,
    system,
    write_parquet_parts,
    write_plan,
)


def raw_received(path: Path, rows: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    intended = np.arange(rows, dtype=np.int64) * 2_000 + 10**12
    columns = {
        "producer_id": np.zeros(rows, np.int64),
        "seq": np.arange(rows, dtype=np.int64),
        "intended_ns": intended,
        "sent_ns": intended + rng.integers(100, 1_000, rows),
        "received_ns": intended + rng.integers(1_000, 50_000, rows),
        "partition": np.full(rows, -1, np.int64),
        "offset": np.arange(rows, dtype=np.int64) + 2**40,
        "hop": np.zeros(rows, np.int64),
        "relay_received_ns": np.full(rows, -1, np.int64),
        "relay_sent_ns": np.full(rows, -1, np.int64),
    }
    header = {"format": "sixnines-raw", "version": 1, "kind": "received", "rows": rows, "columns": list(columns)}
    with path.open("wb") as f:
        f.write(json.dumps(header).encode() + b"\n")
        f.write(np.stack([columns[c] for c in columns], axis=1).astype("<i8").tobytes())
    return columns


def conversion(rows: int, folder: Path, trials: int = 5) -> dict[str, float]:
    """The median of `trials` alternating runs, after one of each that is not counted (first use: imports and
    the page cache)."""
    runs = [_conversion(rows, folder) for _ in range(trials + 1)][1:]
    out: dict[str, float] = {"rows": rows, "raw_mb": round(rows * 8 * runs[0]["columns"] / 1e6, 1)}
    for key in ("convert_s", "direct_parquet_s"):
        out[key] = round(float(np.median([r[key] for r in runs])), 3)
    out["convert_ns_per_row"] = round(out["convert_s"] / rows * 1e9, 1)
    out["extra_ns_per_row"] = round((out["convert_s"] - out["direct_parquet_s"]) / rows * 1e9, 1)
    return out


def _conversion(rows: int, folder: Path) -> dict[str, float]:
    plan = PhasePlan(10**12, 10**9, 10**9, 10**9)
    columns = raw_received(folder / "received-c0.s9raw", rows)
    started = time.perf_counter()
    convert_sample_file(folder / "received-c0.s9raw", folder / "converted.parquet", 0, plan)
    convert_s = time.perf_counter() - started
    started = time.perf_counter()
    step = RECEIVER_WRITE_ROWS  # a Python receiver writes its file in slices of this many rows
    parts = (received_table({k: v[at : at + step] for k, v in columns.items()}, 0, plan) for at in range(0, rows, step))
    write_parquet_parts(RECEIVED_SCHEMA, parts, folder / "direct.parquet")
    direct_s = time.perf_counter() - started
    return {"convert_s": convert_s, "direct_parquet_s": direct_s, "columns": len(columns)}


def event_cost(values: int = 2048, repeats: int = 200) -> dict[str, float]:
    line = json.dumps(
        {
            "kind": "progress",
            "role": "consumer",
            "index": 0,
            "received": 1,
            "bad": 0,
            **{k: list(range(10**9, 10**9 + values)) for k in ("e2e_intended_ns", "e2e_sent_ns", "e2e_at_ns")},
        }
    )
    started = time.perf_counter()
    for _ in range(repeats):
        decode_event(line)
    per = (time.perf_counter() - started) / repeats
    return {"values_per_array": values, "line_kb": round(len(line) / 1e3, 1), "decode_ms": round(per * 1e3, 3)}


def jvm_start_stop(starts: int, folder: Path) -> list[dict[str, float]]:
    """A consumer JVM worker on a tmpfs queue: Popen until `ready`, then `stop` until `done` and its exit."""
    chronicle = system("chronicle")
    spec = chronicle.cell_model.model_validate(
        {
            "system": "chronicle",
            "version": "2026.4",
            "measurement": "e2e",
            "workload": {"message_size_bytes": 512, "rate_per_s": 1000, "measure_s": 1},
        }
    )
    program = chronicle.worker_program(spec, "consumer")
    out = []
    for n in range(starts):
        scratch = folder / f"w{n}"
        scratch.mkdir()
        queue = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="s9bench-"))
        keys = plan_keys(
            role="consumer",
            index=0,
            name="consumer c0",
            cell_id="bench",
            address=str(queue),
            route="",
            names="bench",
            measurement="e2e",
            message_size_bytes=512,
            phase_ns=(10**9, 10**9, 10**9),
            max_schedule_lag_ms=100,
            report_every_ms=250,
            scratch=scratch,
            program=program,
            expected_messages=1000,
        )
        plan = write_plan(keys, scratch / "plan.properties")
        started = time.perf_counter()
        proc = subprocess.Popen(
            program.command(scratch, plan), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert proc.stdout is not None and proc.stdin is not None
        kinds = []
        for line in proc.stdout:
            event = decode_event(line.decode())
            if event and event["kind"] == "ready":
                ready = time.perf_counter() - started
                stopping = time.perf_counter()
                proc.stdin.write(b"stop\n")
                proc.stdin.flush()
            if event:
                kinds.append(event["kind"])
        proc.wait(30)
        done = time.perf_counter() - stopping
        shutil.rmtree(queue, ignore_errors=True)
        out.append(
            {"start_to_ready_s": round(ready, 3), "stop_to_exit_s": round(done, 3), "events": sorted(set(kinds))}
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        result = {
            "load_before": os.getloadavg(),
            "conversion": conversion(args.rows, folder),
            "event_decode": event_cost(),
            "jvm_worker": jvm_start_stop(args.starts, folder),
            "load_after": os.getloadavg(),
            "cores": os.cpu_count(),
        }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
