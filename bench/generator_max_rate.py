"""How fast can the generator's producers keep their schedule? (issues 2 and 14)

Default: core-NATS e2e cells of 1 KiB messages (1 producer, 1 consumer, real nats-server on 127.0.0.1) at
rising uniform rates, then bisection between the last rate that kept schedule-lag p99.9 under the limit and
the first that did not (issue 2's question).

`--scaling`: N producer processes (N = 1, 2, 3, 4) for Kafka 100 B (acks=1, `publish` cells: no consumer,
as ProducerPerformance) and core NATS 32 B (core NATS has no acks, so `e2e` cells with N consumers beside
the N producers): the highest total rate N processes hold with send-lag p99.9 under the limit, no saturated
worker and every message sent, and how that scales with N: until the cores run out (issue 14).

Every probe is a real cell through the runner; the host load is recorded beside every figure. Writes
bench/results/generator_max_rate[_pinned|_scaling].json.

    .venv/bin/python bench/generator_max_rate.py [--limit-ms 1.0] [--measure 10] [--pinned]
    .venv/bin/python bench/generator_max_rate.py --scaling [--limit-ms 5] [--measure 5] [--producers 1,2,3,4]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from bench_tasks import Lake, RunInfo, harness_context, parse_matrix, run_cell, select_cells

# On a 2-core host: the producer gets CPU 1 to itself; broker and consumer share CPU 0.
PINNED = {"producers": [1], "broker": [0], "receivers": [0]}
LADDER = (250, 500, 1000, 2000, 4000, 8000, 12000, 16000, 24000, 32000, 48000, 64000)
SCALING_LADDER = (25_000, 50_000, 100_000, 150_000, 200_000, 300_000, 400_000, 600_000)
SCALING_SHAPES = {"nats": (32, {"mode": "core"}, {}), "kafka": (100, {"partitions": 4}, {"producer": {"acks": "1"}})}
SCALING_MEASUREMENT = {"nats": "e2e", "kafka": "publish"}  # core NATS has no publish acks to measure


def cell_matrix(system: str, size: int, rate: float, measure_s: float, **workload: Any) -> dict:
    _, broker, client = SCALING_SHAPES.get(system, (size, {"mode": "core"}, {}))
    measurement = workload.pop("measurement", "e2e")
    return {
        "name": "generator_max_rate",
        "systems": [{"system": system, "versions": ["latest"], "broker": broker, "client": client}],
        "workload": {
            "message_size_bytes": size,
            "rate_per_s": rate,
            "warmup_s": 2,
            "measure_s": measure_s,
            "cooldown_s": 1,
            **workload,
        },
        "measurements": [measurement],
    }


def probe(raw: dict, lake: Lake, console: Console) -> dict:
    (cell,) = select_cells(parse_matrix(raw, "bench"))
    before = os.getloadavg()[0]
    report = run_cell(cell, lake, RunInfo.new(), console)
    a = report.analysis
    out: dict[str, Any] = {
        "rate_per_s": cell.spec.workload.rate_per_s,
        "producers": cell.spec.workload.producers,
        "status": report.status,
        "reason": report.reason,
        "load_1m": [round(before, 2), round(os.getloadavg()[0], 2)],
    }
    if a is None:
        return out | {"achieved_rate_per_s": 0.0, "lag_p99_9_ms": float("inf"), "lost": None}
    lag = a.lag
    e2e = a.metrics.get("e2e", {}).get("intended")
    producers = [w for w in report.harness.values() if w.get("role") == "producer"]
    return out | {
        "achieved_rate_per_s": round(a.achieved_rate_per_s, 1),
        "sent": a.accounting.sent,
        "scheduled": a.accounting.scheduled,
        "lag_p99_ms": (lag.percentiles["99"] or 0) / 1e6,
        "lag_p99_9_ms": (lag.percentiles["99.9"] or lag.max_ns or 0) / 1e6,
        "lag_max_ms": (lag.max_ns or 0) / 1e6,
        "e2e_p99_ms": None if e2e is None or e2e.percentiles["99"] is None else e2e.percentiles["99"] / 1e6,
        "e2e_max_ms": None if e2e is None else e2e.max_ns / 1e6,
        "lost": a.accounting.lost,
        "producer_cpu_cores": [w.get("cpu_cores") for w in producers],
        "producer_busy": [w.get("busy") for w in producers],
    }


def platform_hiccups(seconds: float = 10.0, nap_s: float = 0.0005) -> dict:
    """jHiccup-style floor: how late a bare `time.sleep` loop wakes on this host with no load running.
    No generator on this machine can keep a tighter schedule than this."""
    overshoot_us = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.monotonic_ns()
        time.sleep(nap_s)
        overshoot_us.append((time.monotonic_ns() - start) / 1e3 - nap_s * 1e6)
    values = np.array(overshoot_us)
    return {
        "seconds": seconds,
        "nap_us": nap_s * 1e6,
        "samples": int(values.size),
        **{
            f"p{p}_us": round(float(np.quantile(values, float(p) / 100, method="inverted_cdf")), 1)
            for p in ("50", "99", "99.9")
        },
        "max_us": round(float(values.max()), 1),
    }


def _passed(probe: dict, limit_ms: float) -> bool:
    return (
        probe["status"] == "ok"
        and probe["lag_p99_9_ms"] < limit_ms
        and probe["achieved_rate_per_s"] >= 0.99 * probe["rate_per_s"]
        and probe.get("sent") == probe.get("scheduled")
    )


def _saturated(probe: dict, limit_ms: float) -> bool:
    """The generator no longer keeps up: short of its rate, or lag far beyond the limit."""
    return probe["achieved_rate_per_s"] < 0.99 * probe["rate_per_s"] or probe["lag_p99_9_ms"] > 20 * limit_ms


def climb(ok: Callable[[float], bool], ladder: tuple[float, ...], saturated: Callable[[], bool], steps: int) -> tuple:
    """The highest rate below which every probe passed, refined by bisection towards the first failing one."""
    best, worst = None, None
    for rate in ladder:
        passed = ok(rate)
        if passed and worst is None:
            best = rate
        elif not passed and worst is None:
            worst = rate
        if worst is not None and saturated():
            break
    if best is not None and worst is not None:
        for _ in range(steps):
            middle = round((best + worst) / 2, -2)
            if middle in (best, worst):
                break
            if ok(middle):
                best = middle
            else:
                worst = middle
    return best, worst


def max_rate_main(args: argparse.Namespace, console: Console) -> dict:
    probes: list[dict] = []
    floor = platform_hiccups()
    console.print(f"platform floor (bare sleep loop): {floor}")
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(tmp)

        def ok(rate: float) -> bool:
            raw = cell_matrix("nats", 1024, rate, args.measure, producers=1, consumers=1, max_schedule_lag_ms=1e6)
            raw["workload"]["cpus"] = PINNED if args.pinned else {}
            result = probe(raw, lake, console)
            probes.append(result)
            console.print(
                f"rate {rate:>8.0f}/s  lag p99.9 {result['lag_p99_9_ms']:.3f} ms  "
                f"achieved {result['achieved_rate_per_s']}/s  lost {result['lost']}"
            )
            return _passed(result, args.limit_ms)  # lag judged here, at the tighter limit; saturation by the cell

        best, worst = climb(ok, LADDER, lambda: _saturated(probes[-1], args.limit_ms), args.bisect_steps)
    return {
        "benchmark": "generator_max_rate",
        "question": f"highest uniform rate with schedule-lag p99.9 < {args.limit_ms} ms, one producer, 1 KiB core NATS",
        "answer_rate_per_s": best,  # highest rate below which every probe passed (None: the lowest failed)
        "first_failing_rate_per_s": worst,
        "passing_rates_per_s": sorted(p["rate_per_s"] for p in probes if _passed(p, args.limit_ms)),
        "saturation_rate_per_s": next((p["rate_per_s"] for p in probes if _saturated(p, args.limit_ms)), None),
        "limit_ms": args.limit_ms,
        "pinned": args.pinned,
        "measure_s": args.measure,
        "platform_hiccups": floor,
        "probes": probes,
    }


def scaling_row(system: str, n: int, args: argparse.Namespace, lake: Lake, console: Console) -> dict:
    """The highest total rate `n` producer processes of `system` hold (publish cells), with every probe."""
    size = SCALING_SHAPES[system][0]
    probes: list[dict] = []

    def ok(rate: float) -> bool:
        workload = {"producers": n, "measurement": SCALING_MEASUREMENT[system], "max_schedule_lag_ms": args.limit_ms}
        if workload["measurement"] == "e2e":
            workload["consumers"] = n
        result = probe(cell_matrix(system, size, rate, args.measure, **workload), lake, console)
        probes.append(result)
        verdict = "held" if _passed(result, args.limit_ms) else f"failed {result['reason'] or ''}"
        console.print(
            f"{system} N={n} total {rate:>9,.0f}/s: {verdict}  lag p99.9 {result['lag_p99_9_ms']:.2f} ms  "
            f"load {result['load_1m']}"
        )
        return _passed(result, args.limit_ms)

    best, worst = climb(ok, SCALING_LADDER, lambda: True, args.bisect_steps)
    return {
        "system": system,
        "message_size_bytes": size,
        "producers": n,
        "highest_total_rate_held_per_s": best,
        "per_producer_per_s": None if best is None else round(best / n),
        "first_failing_total_rate_per_s": worst,
        "probes": probes,
    }


def scaling_main(args: argparse.Namespace, console: Console) -> dict:
    """Per system, per N producer processes: the highest total rate held, and its factor over N = 1."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for system in args.systems.split(","):
            for n in (int(v) for v in args.producers.split(",")):
                rows.append(scaling_row(system, n, args, Lake(tmp), console))
    for row in rows:
        single = next(r for r in rows if r["system"] == row["system"])["highest_total_rate_held_per_s"]
        best = row["highest_total_rate_held_per_s"]
        row["scaling_over_first"] = None if not (best and single) else round(best / single, 2)
    return {
        "benchmark": "generator_scaling",
        "question": "highest total rate N producer processes hold (Kafka: publish cells; core NATS: e2e cells with "
        f"N consumers), send-lag p99.9 under {args.limit_ms} ms, no saturated worker, every message sent",
        "cpus": os.cpu_count(),
        "limit_ms": args.limit_ms,
        "measure_s": args.measure,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit-ms", type=float, default=None, help="schedule-lag p99.9 limit (1; --scaling: 5)")
    parser.add_argument("--measure", type=float, default=None, help="measure seconds per probe (10; --scaling: 5)")
    parser.add_argument("--bisect-steps", type=int, default=None)
    parser.add_argument("--pinned", action="store_true", help="pin the producer to CPU 1, the rest to CPU 0")
    parser.add_argument("--scaling", action="store_true", help="N producer processes, Kafka and NATS")
    parser.add_argument("--systems", default="kafka,nats", help="--scaling: systems to measure")
    parser.add_argument("--producers", default="1,2,3,4", help="--scaling: producer process counts")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    args.limit_ms = args.limit_ms or (5.0 if args.scaling else 1.0)
    args.measure = args.measure or (5.0 if args.scaling else 10.0)
    args.bisect_steps = args.bisect_steps if args.bisect_steps is not None else (1 if args.scaling else 3)
    console = Console(stderr=True)
    result = (scaling_main if args.scaling else max_rate_main)(args, console) | {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "load_1m_at_end": os.getloadavg()[0],
        "context": harness_context(),
    }
    suffix = "_scaling" if args.scaling else "_pinned" if args.pinned else ""
    args.out = args.out or Path(f"bench/results/generator_max_rate{suffix}.json")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    if args.scaling:
        for row in result["rows"]:
            print(json.dumps({k: v for k, v in row.items() if k != "probes"}))
    else:
        keys = ("answer_rate_per_s", "first_failing_rate_per_s", "passing_rates_per_s", "saturation_rate_per_s")
        print(json.dumps({k: result[k] for k in keys} | {"platform_p99_9_us": result["platform_hiccups"]["p99.9_us"]}))


if __name__ == "__main__":
    main()
