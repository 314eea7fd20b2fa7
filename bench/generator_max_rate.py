"""How fast can one producer process keep its schedule? (issue 2's generator benchmark)

Runs core-NATS e2e cells of 1 KiB messages (1 producer, 1 consumer, real nats-server on 127.0.0.1) at
rising uniform rates, then bisects between the last rate that kept schedule-lag p99.9 under the limit and
the first that did not. Writes every probe and the answer to bench/results/generator_max_rate.json.

    .venv/bin/python bench/generator_max_rate.py [--limit-ms 1.0] [--measure 10]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console

from bench_tasks.cell.context import harness_context
from bench_tasks.cell.runner import run_cell, select_cells
from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.spec.matrix import parse_matrix

# On a 2-core host: the producer gets CPU 1 to itself; broker and consumer share CPU 0.
PINNED = {"producers": [1], "broker": [0], "receivers": [0]}
LADDER = (250, 500, 1000, 2000, 4000, 8000, 12000, 16000, 24000, 32000, 48000, 64000)


def probe(rate: float, measure_s: float, lake: Lake, console: Console, pinned: bool) -> dict:
    raw = {
        "name": "generator_max_rate",
        "systems": [{"system": "nats", "versions": ["latest"], "broker": {"mode": "core"}}],
        "workload": {
            "message_size_bytes": 1024,
            "rate_per_s": rate,
            "producers": 1,
            "consumers": 1,
            "warmup_s": 2,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": 1e6,
            "cpus": PINNED if pinned else {},
        },
        "measurements": ["e2e"],
    }
    (cell,) = select_cells(parse_matrix(raw, "bench"))
    report = run_cell(cell, lake, RunInfo.new(), console)
    a = report.analysis
    lag = a.lag
    e2e = a.metrics.get("e2e", {}).get("intended")
    return {
        "rate_per_s": rate,
        "pinned": pinned,
        "status": report.status,
        "achieved_rate_per_s": round(a.achieved_rate_per_s, 1),
        "lag_p99_ms": lag.percentiles["99"] / 1e6,
        "lag_p99_9_ms": lag.percentiles["99.9"] / 1e6,
        "lag_max_ms": lag.max_ns / 1e6,
        "e2e_p99_ms": None if e2e is None or e2e.percentiles["99"] is None else e2e.percentiles["99"] / 1e6,
        "e2e_max_ms": None if e2e is None else e2e.max_ns / 1e6,
        "lost": a.accounting.lost,
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
    return probe["lag_p99_9_ms"] < limit_ms and probe["achieved_rate_per_s"] >= 0.99 * probe["rate_per_s"]


def _saturated(probe: dict, limit_ms: float) -> bool:
    """The generator no longer keeps up: short of its rate, or lag far beyond the limit."""
    return probe["achieved_rate_per_s"] < 0.99 * probe["rate_per_s"] or probe["lag_p99_9_ms"] > 20 * limit_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit-ms", type=float, default=1.0, help="schedule-lag p99.9 limit")
    parser.add_argument("--measure", type=float, default=10.0, help="measure seconds per probe")
    parser.add_argument("--bisect-steps", type=int, default=3)
    parser.add_argument("--pinned", action="store_true", help="pin the producer to CPU 1, the rest to CPU 0")
    parser.add_argument("--out", type=Path, default=None, help="default bench/results/generator_max_rate[_pinned].json")
    args = parser.parse_args()
    console = Console(stderr=True)
    probes: list[dict] = []
    floor = platform_hiccups()
    console.print(f"platform floor (bare sleep loop): {floor}")
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(tmp)

        def ok(rate: float) -> bool:
            result = probe(rate, args.measure, lake, console, args.pinned)
            probes.append(result)
            console.print(
                f"rate {rate:>8.0f}/s  lag p99.9 {result['lag_p99_9_ms']:.3f} ms  "
                f"achieved {result['achieved_rate_per_s']}/s  lost {result['lost']}"
            )
            return _passed(result, args.limit_ms)

        # Climb until the generator saturates; the answer is the highest rate below which every probe
        # passed, refined by bisection towards the first failing one.
        best, worst = None, None
        for rate in LADDER:
            passed = ok(rate)
            if passed and worst is None:
                best = rate
            elif not passed and worst is None:
                worst = rate
            if _saturated(probes[-1], args.limit_ms):
                break
        if best is not None and worst is not None:
            for _ in range(args.bisect_steps):
                middle = round((best + worst) / 2, -2)
                if middle in (best, worst):
                    break
                if ok(middle):
                    best = middle
                else:
                    worst = middle
    result = {
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
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "context": harness_context(),
    }
    args.out = args.out or Path(f"bench/results/generator_max_rate{'_pinned' if args.pinned else ''}.json")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    keys = ("answer_rate_per_s", "first_failing_rate_per_s", "passing_rates_per_s", "saturation_rate_per_s")
    print(json.dumps({k: result[k] for k in keys} | {"platform_p99_9_us": floor["p99.9_us"]}))


if __name__ == "__main__":
    main()
