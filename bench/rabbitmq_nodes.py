"""How long does a cell wait for its RabbitMQ nodes? Start and stop times of 1 node and of a 3-node cluster.

Each start is a fresh `RabbitCluster` (new folders, new epmd, new cookie) timed from `start()` until every node
runs RabbitMQ and sees the whole cluster (`ready_after_s`), then `stop()` is timed until every node, helper and
epmd has ended. What a sweep plans per RabbitMQ cell outside its schedule. Writes
bench/results/rabbitmq_nodes.json with the host load (`uptime`) beside every start.

    .venv/bin/python bench/rabbitmq_nodes.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_tasks.systems.rabbitmq import RabbitCluster, RabbitmqBroker

RESULTS = Path(__file__).parent / "results" / "rabbitmq_nodes.json"
SCHEMA_VERSION = 1  # 1: first version


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def one_start(nodes: int) -> dict[str, Any]:
    broker = RabbitmqBroker(nodes=nodes, queue_type="quorum" if nodes == 3 else "classic")
    with tempfile.TemporaryDirectory() as workdir:
        load = os.getloadavg()[0]
        cluster = RabbitCluster("latest", broker, workdir)
        endpoint = cluster.start()
        began = time.monotonic()
        cluster.stop()
        return {
            "ready_after_s": endpoint.ready_after_s,
            "stop_s": round(time.monotonic() - began, 3),
            "load_1m": round(load, 2),
            "uptime": uptime(),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for nodes in (1, 3):
        runs = []
        for _ in range(args.repeats):
            runs.append(one_start(nodes))
            print(
                f"{nodes} node(s): ready {runs[-1]['ready_after_s']:.2f} s, stop {runs[-1]['stop_s']:.2f} s  "
                f"({runs[-1]['uptime']})"
            )
        results[f"nodes_{nodes}"] = {
            "ready_median_s": round(statistics.median(r["ready_after_s"] for r in runs), 3),
            "stop_median_s": round(statistics.median(r["stop_s"] for r in runs), 3),
            "runs": runs,
        }
    document = {"schema_version": SCHEMA_VERSION, "cpus": os.cpu_count(), **results}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
