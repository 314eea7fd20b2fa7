"""How long does a KRaft cluster take to be ready, formatted by the storage tool or copied from its earlier work?

Starts 1- and 3-node plaintext clusters of one release, alternating the two ways of formatting in each trial on
the same host (bench_tasks.systems.kafka.formatted), and reports the endpoint's `ready_after_s` (from the start
call to every node registered) per way and size, with the load average before and after. Writes
bench/results/kafka_start.json.

    .venv/bin/python bench/kafka_start.py [--version 4.4.0] [--trials 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_tasks.systems.kafka import KafkaCluster, newest_release

RESULTS = Path(__file__).parent / "results" / "kafka_start.json"
SIZES = (1, 3)


def ready_after_s(version: str, nodes: int, copied: bool) -> float:
    """One cluster started and stopped; its ready time (`copied` False: the tool formats even where a copy is kept)."""
    with (
        tempfile.TemporaryDirectory(prefix="sixnines-kafka-start-") as folder,
        KafkaCluster(version, nodes, {}, Path(folder), copy_formatted_storage=copied) as cluster,
    ):
        assert cluster.endpoint is not None
        return cluster.endpoint.ready_after_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=None, help="a Kafka release (default: the newest)")
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    version = args.version or newest_release()
    load_before = os.getloadavg()
    ready_after_s(version, 1, copied=True)  # the first start fetches the release, and keeps a copy if none is
    samples: dict[str, list[float]] = {}
    for _ in range(args.trials):
        for way in ("tool", "copied"):
            for nodes in SIZES:
                samples.setdefault(f"{way} {nodes}", []).append(ready_after_s(version, nodes, way == "copied"))
    result: dict[str, Any] = {
        "version": version,
        "trials": args.trials,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "ready_after_s": {k: {"median": round(statistics.median(v), 2), "runs": v} for k, v in samples.items()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for key, figures in result["ready_after_s"].items():
        print(f"{key:10s} median {figures['median']:5.2f} s  {figures['runs']}")
    print(f"load {result['load_before']} -> {result['load_after']}; wrote {RESULTS}")


if __name__ == "__main__":
    main()
