"""Leader failure on a 3-broker KRaft cluster: how long is the latency spike, and is anything acknowledged lost?

Runs one e2e cell (RF=3, min.insync.replicas=2, acks=all, idempotent producer, 1 KiB at 1000/s) and
SIGKILLs the leader of partition 0 in the middle of the measure phase. Writes
bench/results/kafka_leader_kill.json with the spike (longest gap between receipts, worst response time),
the leader timeline and the message accounting.

    .venv/bin/python bench/kafka_leader_kill.py [--version V] [--rate 1000] [--measure 30]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from bench_tasks import Fault, Lake, RunInfo, parse_matrix, run_cell, select_cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", default="latest")
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--measure", type=float, default=30)
    parser.add_argument("--out", type=Path, default=Path("bench/results/kafka_leader_kill.json"))
    args = parser.parse_args()
    raw = {
        "name": "kafka_leader_kill",
        "systems": [
            {
                "system": "kafka",
                "versions": [args.version],
                "broker": {"brokers": 3, "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
                "client": {"producer": {"acks": "all", "enable.idempotence": True}},
            }
        ],
        "workload": {
            "message_size_bytes": 1024,
            "rate_per_s": args.rate,
            "warmup_s": 15,
            "measure_s": args.measure,
            "cooldown_s": 5,
            "drain_timeout_s": 30,
            "request_timeout_s": 60,
        },
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "bench"))
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory() as tmp:
        kill = Fault("kill", at_s=args.measure / 2)
        report = run_cell(cell, Lake(tmp), RunInfo.new(), console, faults=[kill])
        received = pa.concat_tables([pq.read_table(p) for p in sorted(report.path.glob("received-c*.parquet"))])
        result = json.loads((report.path / "result.json").read_text())
    killed_at = report.faults[0]["start_ns"]
    at = np.sort(received["received_ns"].to_numpy())
    e2e = report.analysis.metrics["e2e"]["intended"]
    out = {
        "benchmark": "kafka_leader_kill",
        "cell_id": cell.id,
        "version": cell.spec.version,
        "status": report.status,
        "longest_receipt_gap_s": float(np.diff(at).max() / 1e9) if at.size > 1 else None,
        "e2e_response_ms": {k: v for k, v in e2e.as_ms().items() if k in ("50", "99", "99.9", "max")},
        "accounting": report.analysis.accounting.to_dict(),
        "leader_changes": result["context"]["broker"]["leader_changes"],
        "kill_ns": killed_at,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(
        json.dumps(
            {k: out[k] for k in ("longest_receipt_gap_s", "e2e_response_ms")}
            | {"acknowledged_but_lost": out["accounting"]["acknowledged_but_lost"]}
        )
    )


if __name__ == "__main__":
    main()
