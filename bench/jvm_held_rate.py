"""The JVM worker's highest held rate through Chronicle Queue: one hop (e2e) and two hops (chain), 512 B (issue 47).

A rate is held when its cell lands `ok` with nothing lost, at least 99 % of the offered rate achieved and send lag
p99.9 under 1 ms. The cell's `max_schedule_lag_ms` is 1, as in seed 002's matrix, so `ok` already means no worker
paused or saturated for longer than that. The ladder climbs until a rate fails, then bisects between the last rate
held and the first that failed, every probe a real cell (JVM workers on a tmpfs queue) on one queue root per shape.

    .venv/bin/python bench/jvm_held_rate.py [--measure 5] [--wait pauser|busy] [--steps 3]

Writes every probe, the rates and the host load around each shape to bench/results/jvm_held_rate.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.native_compare import figures, fresh_brokers, host_load, sixnines
from bench_tasks import BrokerHandle, Cell, Lake, harness_context, parse_matrix, select_cells

RESULTS_SCHEMA_VERSION = 1
SIZE = 512
LAG_LIMIT_MS = 1.0
LADDER = (2_000, 5_000, 10_000, 25_000, 50_000, 100_000, 200_000, 500_000)
SHAPES = {"one_hop": "e2e", "two_hop": "chain"}


def cell(measurement: str, rate: float, measure_s: float, wait: str) -> Cell:
    raw = {
        "name": "jvm_held_rate",
        "systems": [{"system": "chronicle", "versions": ["latest"], "broker": {"storage": "tmpfs", "wait": wait}}],
        "workload": {
            "message_size_bytes": SIZE,
            "rate_per_s": rate,
            "warmup_s": 3,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": LAG_LIMIT_MS,
        },
        "measurements": [measurement],
    }
    (found,) = select_cells(parse_matrix(raw, "jvm_held_rate"))
    return found


def held(probe: dict[str, Any]) -> bool:
    """ok, nothing lost, the rate achieved, send lag p99.9 under the limit."""
    lag = probe.get("send_lag_p99_9_ms")
    return (
        probe["status"] == "ok"
        and probe.get("lost") == 0
        and probe.get("achieved_rate_per_s", 0) >= 0.99 * probe["target_rate_per_s"]
        and lag is not None
        and lag < LAG_LIMIT_MS
    )


class Ladder:
    """The probes of one shape, on one queue root."""

    def __init__(self, measurement: str, brokers: BrokerHandle, lake: Lake, console: Console, args: Any):
        self.measurement, self.brokers, self.lake, self.console, self.args = measurement, brokers, lake, console, args
        self.probes: list[dict[str, Any]] = []

    def probe(self, rate: float) -> bool:
        shape = cell(self.measurement, rate, self.args.measure, self.args.wait)
        report = sixnines(shape, self.brokers, self.lake, self.console)
        found = {"rate_per_s": rate, "host_load": host_load(), **figures(report, "e2e")}  # a chain's e2e: both hops
        found["held"] = held(found)
        self.probes.append(found)
        self.console.print(
            f"  {self.measurement} {rate:>9,.0f}/s: {'held' if found['held'] else 'failed'} {found['reason'] or ''}"
        )
        return found["held"]

    def climb(self) -> dict[str, Any]:
        best = worst = None
        for rate in LADDER:
            if self.probe(rate):
                best = rate
            else:
                worst = rate
                break
        for _ in range(self.args.steps if best is not None and worst is not None else 0):
            middle = round((best + worst) / 2, -3)
            if middle in (best, worst):
                break
            if self.probe(middle):
                best = middle
            else:
                worst = middle
        return {"highest_rate_held_per_s": best, "first_rate_failed_per_s": worst, "probes": self.probes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", type=float, default=5.0, help="measure seconds of every cell")
    parser.add_argument("--wait", choices=("pauser", "busy"), default="pauser", help="the tailers' wait strategy")
    parser.add_argument("--steps", type=int, default=3, help="bisection steps after the ladder")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="one_hop, two_hop")
    parser.add_argument("--out", type=Path, default=Path("bench/results/jvm_held_rate.json"))
    args = parser.parse_args()
    console = Console(stderr=True)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(Path(tmp) / "lake")
        for name in args.shapes.split(","):
            measurement = SHAPES[name]
            console.rule(f"{name} ({measurement})")
            before = host_load()
            with fresh_brokers(cell(measurement, LADDER[0], args.measure, args.wait), Path(tmp) / "q") as brokers:
                results[name] = Ladder(measurement, brokers, lake, console, args).climb()
            results[name]["host_load"] = {"before": before, "after": host_load()}
    out = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "benchmark": "jvm_held_rate",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "criterion": f"cell ok (max_schedule_lag_ms={LAG_LIMIT_MS:g}), nothing lost, >= 99 % of the rate, "
        f"send lag p99.9 < {LAG_LIMIT_MS:g} ms",
        "message_size_bytes": SIZE,
        "wait": args.wait,
        "measure_s": args.measure,
        "shapes": results,
        "context": harness_context(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=str))
    print(
        json.dumps(
            {
                name: {k: r[k] for k in ("highest_rate_held_per_s", "first_rate_failed_per_s")}
                for name, r in results.items()
            }
        )
    )


if __name__ == "__main__":
    main()
