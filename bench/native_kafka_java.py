"""native_compare's row `kafka_java_producer_max_rate`: one sixnines producer on Kafka's Java client (the JVM worker,
`client.library: java`) beside ProducerPerformance, on one fresh broker in one run (issue 47, goal >= 0.8x); and,
on the same broker, what the client library costs: e2e from sent at one fixed rate with librdkafka and with the
Java client, in turn, `--trials` times.

    .venv/bin/python bench/native_compare.py --rows kafka_java_producer_max_rate [--measure 5] [--trials 3]

The shape is the librdkafka row's (`kafka_producer_max_rate`): 100 B, acks=1, linger.ms=5 on both sides, one
partition, a consumer receiving and stamping every message; the held rate is the highest open-loop rate whose cell
passed every harness gate (send-lag p99.9 < 5 ms, no saturated worker, no JVM pause past the limit) with nothing
lost. The row's helpers are native_compare's own, taken from the module that defined `rows`' class (run as a
script, that module is `__main__`, whose kafka-tools release `main()` has set).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from bench.trials import ratio, summarize_trials, trial_ratios

JAVA_LADDER = (10_000, 20_000, 50_000, 100_000, 150_000, 200_000, 300_000)
PRODUCER = {"acks": "1", "linger.ms": "5"}
CLIENT_COST_RATE = 5_000  # msg/s: far below either client's ceiling, so the figures are each client's latency
NOTES = (
    "ProducerPerformance is closed loop (sends as fast as the producer takes records) on a fresh JVM, with the "
    "same kafka-clients release; sixnines is the highest open-loop fixed rate one JVM worker producer held, a JVM "
    "worker consumer receiving and stamping every message. client_cost: e2e from sent at one rate, librdkafka "
    "(the Python workers) and the Java client (the JVM workers) in turn on the same broker."
)


def kafka_java_producer_max_rate(rows: Any) -> dict[str, Any]:
    nc = sys.modules[type(rows).__module__]

    def shape(library: str) -> Callable[..., Any]:
        """The cell at `rate`; each `trial` its own cell id, so its own topic on the shared broker."""
        client = {"library": library, "producer": PRODUCER}
        return lambda rate, trial=0: nc.make_cell("kafka", "e2e", 100, rate, rows.measure_s, client=client, seed=trial)

    java = shape("java")
    with nc.fresh_brokers(java(1000), rows.workdir) as brokers:
        native = rows._producer_performance(brokers, "5")
        ladder = JAVA_LADDER[:3] if rows.quick else JAVA_LADDER
        ours = nc.highest_rate(java, ladder, brokers, rows.lake, rows.console)
        cost = client_cost(nc, rows, brokers, shape("librdkafka"), java)
    return {
        "shape": "Kafka 100 B, acks=1, linger.ms=5, one producer process on the Java client (and one consumer)",
        "native": {"tool": "ProducerPerformance --throughput -1", "linger.ms=5": native},
        "sixnines": ours,
        "ratio": {"rate": ratio(ours["highest_rate_held_per_s"], native["records_per_s"])},
        "target": "ratio >= 0.8",
        "client_cost": cost,
        "notes": NOTES,
    }


def client_cost(
    nc: Any, rows: Any, brokers: Any, librdkafka: Callable[..., Any], java: Callable[..., Any]
) -> dict[str, Any]:
    """e2e from sent with each client at one rate, in turn (librdkafka, then Java) `rows.trials` times; a trial's
    ratio is Java / librdkafka per percentile, the row's the median over trials (bench/trials.py)."""
    trials = []
    for index in range(rows.trials):
        before = nc.host_load()
        cells = librdkafka(CLIENT_COST_RATE, index), java(CLIENT_COST_RATE, index)
        theirs, mine = (nc.figures(nc.sixnines(cell, brokers, rows.lake, rows.console), "e2e") for cell in cells)
        from_sent = theirs.get("e2e_from_sent_ms", {})
        as_native = {f"p{p}_ms": from_sent.get(p) for p in nc.LATENCY_PERCENTILES}
        ratios = trial_ratios(as_native, mine.get("e2e_from_sent_ms", {}), nc.LATENCY_PERCENTILES)
        after = nc.host_load()
        trial = {"trial": index + 1, "librdkafka": theirs, "java": mine, "ratio_java_to_librdkafka": ratios}
        trials.append({**trial, "host_load": {"before": before, "after": after}})
        load = before["loadavg_1m"]
        rows.console.print(f"  client cost trial {index + 1}: java/librdkafka {ratios} (load {load:.2f})")
    summary = summarize_trials(
        [{**t, "ratio": t["ratio_java_to_librdkafka"]} for t in trials], nc.LATENCY_PERCENTILES, 1.0
    )
    return {
        "rate_per_s": CLIENT_COST_RATE,
        "trials": trials,
        "ratio_java_to_librdkafka": {p: s["median"] for p, s in summary.items()},
    }
