"""sixnines beside the native tools, shape by shape, each pair on one fresh broker in one run (issue 14).

Rows (each on its own freshly started broker, the native tool first, then sixnines, the host load before
and after both):

  kafka_producer_max_rate   ProducerPerformance --throughput -1 vs the highest rate one sixnines producer keeps
                            with send-lag p99.9 < 5 ms and an unsaturated consumer (Kafka 100 B, acks=1)
  nats_core_32b_max_rate    nats bench pub/sub vs the same for core NATS 32 B
  nats_core_1kib_max_rate   the same for 1 KiB
  nats_latency_1kib         nats latency --size 1024 --rate 1000 vs sixnines e2e from sent (p50, p99)
  nats_request_reply_1kib   nats bench service request --throughput 1000 vs sixnines rtt from sent (p50, p99)
  kafka_end_to_end_latency  EndToEndLatency (100 B, acks=1) vs sixnines e2e from sent at 500/s

Writes every figure, the ratio sixnines/native, what each tool measures and the host load to
bench/results/native_compare.json (bench_tasks.native says where the tools measure different things).

    .venv/bin/python bench/native_compare.py [--rows nats_latency_1kib,...] [--measure 5] [--trials 5] [--quick]

With --trials N the latency rows run the native tool and sixnines in turn N times on one broker and report
the median of the per-trial ratios beside every trial (bench/trials.py says why).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

# This checkout first: the harness measured is its own, not that of whichever checkout the venv installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import native_rabbitmq, native_redis
from bench.native_chronicle import chronicle_jlbh
from bench.native_kafka_java import kafka_java_producer_max_rate
from bench.trials import ratio, summarize_trials, trial_ratios
from bench_tasks import (
    BrokerHandle,
    Cell,
    CellReport,
    Lake,
    harness_context,
    held_brokers,
    java,
    parse_matrix,
    run_on_brokers,
    select_cells,
)
from bench_tasks.systems.kafka import (
    END_TO_END_LATENCY,
    KAFKA,
    PRODUCER_PERFORMANCE,
    create_topic,
    kafka_tool,
    parse_end_to_end_latency,
    parse_producer_performance,
    tools_classpath,
)
from bench_tasks.systems.nats import (
    NATSCLI_VERSION,
    latency_percentiles_ms,
    natscli,
    natscli_version,
    parse_nats_bench_csv,
)

RESULTS_SCHEMA_VERSION = 2  # 1: first version; 2: latency rows hold trials, their ratio is the per-trial median
LATENCY_PERCENTILES = ("50", "99")
LATENCY_TARGET = 1.25  # issue 14: sixnines from sent within 1.25x the native tool
RATIO_MEANS = (
    "ratio: per percentile, the median over the trials of (sixnines from sent / native) within each trial, "
    "native and sixnines run in turn on one broker; half the trials were at or under it. ratio_summary adds "
    "the range and how many trials met the target; every trial's figures and host load are in trials."
)
LAG_LIMIT_MS = 5.0  # the criterion for a rate one producer "holds"
KAFKA_PRODUCER = {"acks": "1", "linger.ms": "5"}  # both sides; librdkafka's and Kafka 4's default linger
LADDERS = {
    "kafka": (20_000, 50_000, 100_000, 150_000, 200_000, 300_000),
    "nats": (20_000, 50_000, 100_000, 150_000, 200_000, 300_000),
}
TOOL_NOTES = {
    "kafka_producer_max_rate": "ProducerPerformance is closed loop (sends as fast as the producer takes records) "
    "on a fresh JVM; sixnines is the highest open-loop fixed rate whose cell passed every harness gate (send-lag "
    "p99.9 < 5 ms, no saturated worker) with nothing lost, a consumer receiving and stamping every message.",
    "nats_max_rate": "nats bench pub publishes as fast as it can, closed loop, its subscriber in another process; "
    "sixnines is the highest open-loop fixed rate whose cell passed every harness gate with nothing lost.",
    "nats_latency_1kib": "nats latency paces itself by sleeping and measures one way from the actual send (wall "
    "clock, publisher and subscriber in one Go process); sixnines' e2e from sent is the same quantity, between "
    "two processes on CLOCK_MONOTONIC. sixnines' e2e from intended (also recorded) adds its schedule lag.",
    "nats_request_reply_1kib": "nats bench service request times each request from its send to its reply against "
    "`nats bench service serve`; sixnines' rtt from sent is the same against its own responder process.",
    "kafka_end_to_end_latency": "EndToEndLatency is closed loop (one record in flight: send, consume, repeat), "
    "producer linger.ms=0, consumer fetch.max.wait.ms=0, and truncates every latency to whole milliseconds; "
    "sixnines runs open loop at 500/s (linger.ms=0) and its figures are shown exact and truncated alike.",
}


def host_load() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"loadavg_1m": one, "loadavg_5m": five, "loadavg_15m": fifteen, "uptime": uptime, "cpus": os.cpu_count()}


def make_cell(system: str, measurement: str, size: int, rate: float, measure_s: float, **extra: Any) -> Cell:
    client = extra.pop("client", {"producer": KAFKA_PRODUCER} if system == "kafka" else {})
    raw = {
        "name": "native_compare",
        "systems": [
            {
                "system": system,
                "versions": ["latest"],
                "broker": {"mode": "core"} if system == "nats" else {"partitions": 1},
                "client": client,
            }
        ],
        "workload": {
            "message_size_bytes": size,
            "rate_per_s": rate,
            "warmup_s": 2,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": LAG_LIMIT_MS,
            **extra,
        },
        "measurements": [measurement],
    }
    (cell,) = select_cells(parse_matrix(raw, "native_compare"))
    return cell


def fresh_brokers(cell: Cell, workdir: Path) -> contextlib.AbstractContextManager[BrokerHandle]:
    """The row's broker, started from scratch for its shape; both tools run against it, then it is stopped."""
    return held_brokers(cell, workdir / cell.id)


def sixnines(cell: Cell, brokers: BrokerHandle, lake: Lake, console: Console) -> CellReport:
    """One cell against the running `brokers`, through the same drive and land steps as every run."""
    return run_on_brokers(cell, brokers, lake, console)


def figures(report: CellReport, metric: str) -> dict[str, Any]:
    """A cell's outcome as plain figures (ms): status, rate, send lag, the metric from sent and from intended."""
    out: dict[str, Any] = {"cell_id": report.cell.id, "status": report.status, "reason": report.reason}
    a = report.analysis
    if a is None:
        return out
    out |= {
        "target_rate_per_s": a.target_rate_per_s,
        "achieved_rate_per_s": round(a.achieved_rate_per_s, 1),
        "lost": a.accounting.lost,
        "send_lag_p99_9_ms": _ms(a.lag.percentiles.get("99.9")),
    }
    for basis in ("sent", "intended"):
        s = a.metrics.get(metric, {}).get(basis)
        if s is not None:
            out[f"{metric}_from_{basis}_ms"] = {
                "mean": _ms(s.mean_ns),
                **{p: _ms(s.percentiles[p]) for p in ("50", "99", "99.9")},
                "max": _ms(s.max_ns),
            }
    out["harness"] = {
        name: {k: w.get(k) for k in ("busy", "cpu_cores", "rate_per_s", "backlog")}
        for name, w in report.harness.items()
    }
    return out


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def held(report: CellReport) -> bool:
    a = report.analysis
    return (
        report.status == "ok"
        and a is not None
        and a.accounting.lost == 0
        and a.achieved_rate_per_s >= 0.99 * a.target_rate_per_s
    )


def highest_rate(
    shape: Callable[[float], Cell], ladder: tuple[int, ...], brokers: BrokerHandle, lake: Lake, console: Console
) -> dict[str, Any]:
    """Climb the ladder until a rate does not hold, then bisect once between the last that held and it."""
    probes: list[dict[str, Any]] = []

    def probe(rate: float) -> bool:
        report = sixnines(shape(rate), brokers, lake, console)
        probes.append({"rate_per_s": rate, "held": held(report), **figures(report, "e2e")})
        console.print(f"  sixnines {rate:>9,.0f}/s: {'held' if held(report) else 'failed'} {report.reason or ''}")
        return held(report)

    best = worst = None
    for rate in ladder:
        if probe(rate):
            best = rate
        else:
            worst = rate
            break
    if best is not None and worst is not None:
        middle = round((best + worst) / 2, -3)
        if middle not in (best, worst) and probe(middle):
            best = middle
        elif middle not in (best, worst):
            worst = middle
    return {"highest_rate_held_per_s": best, "first_rate_failed_per_s": worst, "probes": probes}


def run_logged(cmd: list[str], timeout_s: float) -> str:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:6])}… exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout + done.stderr


def _latency_summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """A latency row's entry: every trial, and the median of the per-trial ratios as the row's ratio."""
    summary = summarize_trials(trials, LATENCY_PERCENTILES, LATENCY_TARGET)
    return {
        "trials": trials,
        "ratio": {p: s["median"] for p, s in summary.items()},
        "ratio_summary": summary,
        "ratio_means": RATIO_MEANS,
        "target": f"ratio <= {LATENCY_TARGET} at p50 and p99",
    }


class Rows:
    """The comparison rows; each returns its entry for the results file."""

    def __init__(self, workdir: Path, lake: Lake, console: Console, measure_s: float, quick: bool, trials: int = 1):
        self.workdir, self.lake, self.console = workdir, lake, console
        self.measure_s, self.quick, self.trials = measure_s, quick, trials

    def kafka_producer_max_rate(self) -> dict[str, Any]:
        shape = self._rate_shape("kafka", 100)
        with fresh_brokers(shape(1000), self.workdir) as brokers:
            native = {f"linger.ms={linger}": self._producer_performance(brokers, linger) for linger in ("5", "0")}
            ours = highest_rate(shape, self._ladder("kafka"), brokers, self.lake, self.console)
        theirs = native["linger.ms=5"]["records_per_s"]
        return {
            "shape": "Kafka 100 B, acks=1, linger.ms=5, one producer process (sixnines: and one consumer)",
            "native": {"tool": "ProducerPerformance --throughput -1", **native},
            "sixnines": ours,
            "ratio": {"rate": ratio(ours["highest_rate_held_per_s"], theirs)},
            "notes": TOOL_NOTES["kafka_producer_max_rate"],
        }

    def _producer_performance(self, brokers: BrokerHandle, linger: str) -> dict[str, Any]:
        topic = f"native-pp-{linger}-{time.monotonic_ns()}"
        create_topic(brokers.address, topic, 1, 1, {})
        records = 600_000 if self.quick else 3_000_000
        args = ["--topic", topic, "--num-records", str(records), "--record-size", "100", "--throughput", "-1"]
        props = ["--producer-props", f"bootstrap.servers={brokers.address}", "acks=1", f"linger.ms={linger}"]
        output = run_logged(kafka_tool(java(), tools_classpath(_KAFKA), PRODUCER_PERFORMANCE, args + props), 600)
        result = parse_producer_performance(output)
        self.console.print(f"  ProducerPerformance linger.ms={linger}: {result.records_per_s:,.0f} records/s")
        return {"records": result.records, "records_per_s": round(result.records_per_s, 1)}

    def nats_max_rate(self, size: int) -> dict[str, Any]:
        shape = self._rate_shape("nats", size)
        with fresh_brokers(shape(1000), self.workdir) as brokers:
            native = self._nats_bench(brokers.address, size)
            ours = highest_rate(shape, self._ladder("nats"), brokers, self.lake, self.console)
        return {
            "shape": f"core NATS {size} B, one publisher process (and one subscriber)",
            "native": native,
            "sixnines": ours,
            "ratio": {"rate": ratio(ours["highest_rate_held_per_s"], native["publisher_msgs_per_s"])},
            "notes": TOOL_NOTES["nats_max_rate"],
        }

    def _nats_bench(self, url: str, size: int) -> dict[str, Any]:
        nats, subject = str(natscli()), f"native.bench.{size}"
        msgs = str(500_000 if self.quick else 3_000_000)
        with tempfile.TemporaryDirectory() as tmp:
            sub_csv, pub_csv = Path(tmp) / "sub.csv", Path(tmp) / "pub.csv"
            common = ["-s", url, "--size", f"{size}B", "--msgs", msgs, "--no-progress"]
            sub = subprocess.Popen(
                [nats, "bench", "sub", subject, *common, "--csv", str(sub_csv)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                time.sleep(1.0)  # the subscriber is subscribed before the first publish
                run_logged([nats, "bench", "pub", subject, *common, "--csv", str(pub_csv)], 600)
                sub.wait(timeout=60)
            finally:
                if sub.poll() is None:
                    sub.kill()
                    sub.wait()
            (pub,) = parse_nats_bench_csv(pub_csv.read_text())
            subs = parse_nats_bench_csv(sub_csv.read_text()) if sub_csv.exists() else []
        rate = float(pub["MsgsPerSec"])
        self.console.print(f"  nats bench pub {size} B: {rate:,.0f} msgs/s")
        return {
            "tool": f"nats bench pub/sub ({NATSCLI_VERSION})",
            "publisher_msgs_per_s": rate,
            "subscriber_msgs_per_s": float(subs[0]["MsgsPerSec"]) if subs else None,
        }

    def nats_latency_1kib(self) -> dict[str, Any]:
        cell = make_cell("nats", "e2e", 1024, 1000, self.measure_s)
        with fresh_brokers(cell, self.workdir) as brokers:
            trials = self._alternate(
                lambda: self._nats_latency(brokers.address),
                lambda: figures(sixnines(cell, brokers, self.lake, self.console), "e2e"),
                "e2e",
            )
        return {
            "shape": "core NATS 1 KiB @ 1000/s, one-way latency from the actual send",
            **_latency_summary(trials),
            "notes": TOOL_NOTES["nats_latency_1kib"],
        }

    def _nats_latency(self, url: str) -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as tmp:
            hist = Path(tmp) / "latency"
            cmd = [str(natscli()), "-s", url, "latency", "--server-b", url, "--size", "1024", "--rate", "1000"]
            run_logged([*cmd, "--duration", f"{self.measure_s:g}s", "--histogram", str(hist)], 600)
            exact = latency_percentiles_ms(Path(f"{hist}.raw").read_text())
        self.console.print(f"  nats latency: p50 {exact['50']:.3f} ms p99 {exact['99']:.3f} ms")
        return {
            "tool": f"nats latency ({NATSCLI_VERSION})",
            "p50_ms": round(exact["50"], 4),
            "p99_ms": round(exact["99"], 4),
            "count": int(exact["count"]),
        }

    def nats_request_reply_1kib(self) -> dict[str, Any]:
        cell = make_cell("nats", "rtt", 1024, 1000, self.measure_s, consumers=1)
        with fresh_brokers(cell, self.workdir) as brokers:
            trials = self._alternate(
                lambda: self._nats_service(brokers.address),
                lambda: figures(sixnines(cell, brokers, self.lake, self.console), "rtt"),
                "rtt",
            )
        return {
            "shape": "core NATS request/reply 1 KiB @ 1000/s, one requester, one responder",
            **_latency_summary(trials),
            "notes": TOOL_NOTES["nats_request_reply_1kib"],
        }

    def _alternate(
        self,
        native: Callable[[], dict[str, Any]],
        ours: Callable[[], dict[str, Any]],
        metric: str,
        ratios: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """`self.trials` trials on one broker, the native tool then sixnines in each (ABAB…), each trial with its
        own figures, the host load around it and its ratios (`bench/trials.py`): by default per percentile of
        `metric` from sent; `ratios(native, sixnines)` where the tool reports another figure."""
        trials = []
        for index in range(self.trials):
            before = host_load()
            theirs = native()
            mine = ours()
            if ratios is None:
                trial = trial_ratios(theirs, mine.get(f"{metric}_from_sent_ms", {}), LATENCY_PERCENTILES)
            else:
                trial = ratios(theirs, mine)
            trials.append(
                {
                    "trial": index + 1,
                    "native": theirs,
                    "sixnines": mine,
                    "ratio": trial,
                    "host_load": {"before": before, "after": host_load()},
                }
            )
            self.console.print(f"  trial {index + 1}/{self.trials}: ratio {trial} (load {before['loadavg_1m']:.2f})")
        return trials

    def _nats_service(self, url: str) -> dict[str, Any]:
        nats, subject = str(natscli()), "native.service"
        serve = subprocess.Popen(
            [nats, "-s", url, "bench", "service", "serve", subject, "--no-progress"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(1.0)
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "request.csv"
                msgs = str(int(1000 * self.measure_s))
                request = [nats, "-s", url, "bench", "service", "request", subject, "--size", "1KB", "--msgs", msgs]
                run_logged([*request, "--throughput", "1000", "--no-progress", "--csv", str(out)], 600)
                (row,) = parse_nats_bench_csv(out.read_text())
        finally:
            serve.kill()
            serve.wait()
        p50, p99 = float(row["P50LatencyMicroSecs"]) / 1e3, float(row["P99LatencyMicroSecs"]) / 1e3
        self.console.print(f"  nats bench service request: p50 {p50:.3f} ms p99 {p99:.3f} ms")
        return {"tool": f"nats bench service request ({NATSCLI_VERSION})", "p50_ms": p50, "p99_ms": p99}

    def kafka_end_to_end_latency(self) -> dict[str, Any]:
        client = {"producer": {"acks": "1", "linger.ms": "0"}}
        cell = make_cell("kafka", "e2e", 100, 500, self.measure_s, client=client)
        with fresh_brokers(cell, self.workdir) as brokers:
            topic = f"native-e2e-{time.monotonic_ns()}"
            create_topic(brokers.address, topic, 1, 1, {})
            args = [brokers.address, topic, str(int(500 * self.measure_s)), "1", "100"]
            output = run_logged(kafka_tool(java(), tools_classpath(_KAFKA), END_TO_END_LATENCY, args), 900)
            native = parse_end_to_end_latency(output)
            ours = figures(sixnines(cell, brokers, self.lake, self.console), "e2e")
        sent = ours.get("e2e_from_sent_ms", {})
        self.console.print(f"  EndToEndLatency: avg {native.avg_ms} ms, p50 {native.p50_ms} ms, p99 {native.p99_ms} ms")
        return {
            "shape": "Kafka 100 B, acks=1, linger.ms=0, one producer and one consumer",
            "native": {
                "tool": "EndToEndLatency",
                "avg_ms": native.avg_ms,
                "p50_ms": native.p50_ms,
                "p99_ms": native.p99_ms,
                "p99_9_ms": native.p999_ms,
            },
            "sixnines": ours,
            "sixnines_whole_ms": {p: None if sent.get(p) is None else int(sent[p]) for p in ("50", "99", "99.9")},
            "ratio": {"avg": ratio(sent.get("mean"), native.avg_ms)},
            "notes": TOOL_NOTES["kafka_end_to_end_latency"],
        }

    def _rate_shape(self, system: str, size: int) -> Callable[[float], Cell]:
        return lambda rate: make_cell(system, "e2e", size, rate, self.measure_s)

    def _ladder(self, system: str) -> tuple[int, ...]:
        return LADDERS[system][:3] if self.quick else LADDERS[system]


_KAFKA = "4.3.1"  # kafka-tools release; set in main() to the Kafka release `latest` resolves to, as the cells do
ROWS: dict[str, Callable[[Rows], dict[str, Any]]] = {
    "kafka_producer_max_rate": Rows.kafka_producer_max_rate,
    "nats_core_32b_max_rate": lambda rows: rows.nats_max_rate(32),
    "nats_core_1kib_max_rate": lambda rows: rows.nats_max_rate(1024),
    "nats_latency_1kib": Rows.nats_latency_1kib,
    "nats_request_reply_1kib": Rows.nats_request_reply_1kib,
    "kafka_end_to_end_latency": Rows.kafka_end_to_end_latency,
    "rabbitmq_perftest_e2e": lambda rows: native_rabbitmq.perf_test_row(rows, "consumer"),
    "rabbitmq_perftest_confirm": lambda rows: native_rabbitmq.perf_test_row(rows, "confirm"),
    "rabbitmq_perftest_e2e_java": lambda rows: native_rabbitmq.perf_test_row(rows, "consumer", "java"),
    "rabbitmq_perftest_confirm_java": lambda rows: native_rabbitmq.perf_test_row(rows, "confirm", "java"),
    "redis_benchmark_xadd": native_redis.benchmark_row,
    "redis_benchmark_xadd_java": lambda rows: native_redis.benchmark_row(rows, "java"),
    "redis_cli_latency": native_redis.cli_latency_row,
    "kafka_java_producer_max_rate": kafka_java_producer_max_rate,
    "chronicle_jlbh_512b": chronicle_jlbh,
}


def main() -> None:
    global _KAFKA
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to run (default: all)")
    parser.add_argument("--measure", type=float, default=10.0, help="measure seconds of every sixnines cell")
    parser.add_argument("--quick", action="store_true", help="shorter native runs and ladders (a smoke run)")
    parser.add_argument(
        "--trials", type=int, default=1, help="latency rows: native and sixnines runs in turn, this many of each"
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results/native_compare.json"))
    args = parser.parse_args()
    if args.trials < 1:
        parser.error(f"--trials must be at least 1, not {args.trials}")
    wanted = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = sorted(set(wanted) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; rows: {', '.join(ROWS)}")
    _KAFKA = KAFKA.resolve_version("latest")
    console = Console(stderr=True)
    console.print(f"natscli {natscli_version(natscli())}, kafka-tools {_KAFKA}, host load {host_load()['uptime']}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        rows = Rows(Path(tmp) / "brokers", Lake(Path(tmp) / "lake"), console, args.measure, args.quick, args.trials)
        for name in wanted:
            console.rule(name)
            before = host_load()
            entry = ROWS[name](rows)
            results[name] = {**entry, "host_load": {"before": before, "after": host_load()}}
            console.print(
                f"  ratio {entry['ratio']}  (load {before['loadavg_1m']:.2f} → {host_load()['loadavg_1m']:.2f})"
            )
    out = {
        "schema_version": RESULTS_SCHEMA_VERSION,
        "benchmark": "native_compare",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "command": " ".join(sys.argv),
        "natscli": NATSCLI_VERSION,
        "kafka_tools": _KAFKA,
        "measure_s": args.measure,
        "trials": args.trials,
        "rows": results,
        "context": harness_context(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=str))
    print(
        json.dumps(
            {
                name: {"ratio": r["ratio"], "load_1m": r["host_load"]["before"]["loadavg_1m"]}
                for name, r in results.items()
            }
        )
    )


if __name__ == "__main__":
    main()
