"""RabbitMQ's PerfTest beside sixnines (`bench/native_compare.py` rows `rabbitmq_perftest_e2e`, `_confirm`).

The shape: one fresh node, a transient classic queue, 1 KiB messages at 1000/s, publisher confirms, one producer
and one consumer acknowledging automatically. PerfTest (`com.rabbitmq:perf-test`, fetched from Maven Central into
the cache with Maven, never into git) and a sixnines e2e cell with confirms run in turn on the node, trial after
trial. One PerfTest run gives both of its latencies, one sixnines cell both of its metrics; the e2e row compares
PerfTest's consumer latency with e2e from sent, the confirm row its confirm latency with publish from sent.

The node's user has a password per cell: PerfTest reads its URI, credentials included, from an environment
variable under a prefix of its own (`RABBITMQ_PERF_TEST_ENV_PREFIX`), in an environment holding nothing else it
would read as an option; the URI is never on a command line, printed or written to the results.
"""

from __future__ import annotations

import os
import re
import subprocess
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bench_tasks import Cell, SixninesError, cache_dir, java, login_url, parse_matrix, verified_libs

if TYPE_CHECKING:
    from bench.native_compare import Rows

PERF_TEST = ("com.rabbitmq", "perf-test", "2.22.1")
MAIN_CLASS = "com.rabbitmq.perf.PerfTest"
ENV_PREFIX = "SIXNINES_PERFTEST_"
FETCH_TIMEOUT_S = 600.0
RATE_PER_S, SIZE_BYTES = 1000, 1024
WARMUP_S = 2  # sixnines' warm-up; PerfTest runs this much longer so both see about as many measured messages
_SUMMARY = re.compile(r"(consumer|confirm) latency min/median/75th/95th/99th (\d+)/(\d+)/(\d+)/(\d+)/(\d+) µs")
NOTES = (
    "PerfTest stamps System.nanoTime() into each body when it publishes (its rate limiter sleeps to the next "
    "slot; a late send is stamped late) and its consumer subtracts it on delivery; its confirm latency runs from "
    "that publish to the Basic.Ack. sixnines' e2e and publish from sent are the same quantities, stamped around "
    "pika's calls, between two processes on CLOCK_MONOTONIC; its from-intended figures (also recorded) add its "
    "schedule lag, and at 1000/s, under capacity, the two bases are close. PerfTest's summary percentiles come "
    "from a Dropwizard ExponentiallyDecayingReservoir (a weighted sample of 1028 latencies of the whole run, its "
    "first JIT-cold second included), so its p99 rests on about ten sampled values; sixnines' are exact over the "
    "measure phase. PerfTest publishes to its own direct exchange, sixnines to the default one: one routing step "
    "either way. Both consume with automatic acks on one connection per producer and consumer."
)


class PerfTestError(SixninesError):
    """PerfTest could not be fetched or run, or printed no summary."""


def perf_test_classpath() -> str:
    """`<cache>/perf-test/<version>/libs/*`, fetched with Maven on first use and checked against its manifest."""
    group, artifact, version = PERF_TEST
    home = cache_dir() / "perf-test" / version
    return str(verified_libs(f"{group}:{artifact}", version, home, PerfTestError, FETCH_TIMEOUT_S) / "*")


def perf_test_uri(address: str, client: dict[str, Any]) -> str:
    """The first node's AMQP URI with the cell's credentials; the default vhost spelled out, as the Java client
    reads an empty path as the vhost '' (refused: 'vhost not found')."""
    first = address.split(",")[0]
    parts = urlsplit(first)
    vhost = parts.path.lstrip("/") or "%2F"
    bare = f"{parts.scheme}://{parts.netloc}/{vhost}"
    return login_url(bare, client.get("username"), client.get("password")) if client.get("username") else bare


def perf_test_command(seconds: int) -> list[str]:
    """PerfTest for `seconds`: one producer at the shape's rate with confirms, one auto-acking consumer."""
    rate, size, window = str(RATE_PER_S), str(SIZE_BYTES), "100000"  # window: sixnines' client.max_unconfirmed
    args = ["-x", "1", "-y", "1", "-s", size, "-r", rate, "-c", window, "-a", "-z", str(seconds)]
    return [java(), "-cp", perf_test_classpath(), MAIN_CLASS, *args]


def perf_test_env(uri: str) -> dict[str, str]:
    """Only what java needs, and the URI under PerfTest's prefix: nothing else in this process's environment can
    be read as one of PerfTest's options (it maps e.g. RATE or SIZE to --rate, --size)."""
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "JAVA_HOME", "LANG") if k in os.environ}
    return keep | {"RABBITMQ_PERF_TEST_ENV_PREFIX": ENV_PREFIX, f"{ENV_PREFIX}URI": uri}


def parse_perf_test(output: str) -> dict[str, dict[str, float]]:
    """PerfTest's closing summary: {'consumer'|'confirm': {'p50_ms', 'p99_ms', ...}} from its µs figures."""
    found: dict[str, dict[str, float]] = {}
    for kind, *values in _SUMMARY.findall(output):
        low, p50, p75, p95, p99 = (int(v) / 1000 for v in values)
        found[kind] = {"min_ms": low, "p50_ms": p50, "p75_ms": p75, "p95_ms": p95, "p99_ms": p99}
    if set(found) != {"consumer", "confirm"}:
        raise PerfTestError(f"PerfTest printed no consumer and confirm latency summary: {output[-500:]!r}")
    return found


def run_perf_test(address: str, client: dict[str, Any], seconds: int) -> dict[str, Any]:
    """One PerfTest run against the node: its command (without the URI) and both latency summaries."""
    cmd = perf_test_command(seconds)
    uri = perf_test_uri(address, client)
    done = subprocess.run(
        cmd, env=perf_test_env(uri), capture_output=True, text=True, timeout=seconds + 120, stdin=subprocess.DEVNULL
    )
    output = (done.stdout + done.stderr).replace(uri, "<uri>")
    if done.returncode != 0:
        raise PerfTestError(f"PerfTest exited {done.returncode}: {output[-500:]}")
    return {"command": " ".join(cmd[3:]), **parse_perf_test(output)}


def shape_cell(measure_s: float, lag_limit_ms: float, library: str = "pika") -> Cell:
    """The sixnines side: an e2e cell with confirms, so one cell gives both e2e and publish from sent; on pika in
    the Python workers, or (`library` java) on RabbitMQ's Java client, PerfTest's own, in the JVM worker."""
    system = {"system": "rabbitmq", "versions": ["latest"], "broker": {"queue_type": "classic"}}
    raw = {
        "name": "native_compare",
        "systems": [{**system, "client": {"library": library}}],
        "workload": {
            "message_size_bytes": SIZE_BYTES,
            "rate_per_s": RATE_PER_S,
            "warmup_s": WARMUP_S,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": lag_limit_ms,
        },
        "measurements": ["e2e"],
    }
    from bench_tasks import select_cells

    (cell,) = select_cells(parse_matrix(raw, "native_compare"))
    return cell


def perf_test_row(rows: Rows, kind: str, library: str = "pika") -> dict[str, Any]:
    """One row: `kind` 'consumer' (against e2e) or 'confirm' (against publish), trials on one fresh node; sixnines
    on `library` (pika, or java: the JVM worker on amqp-client)."""
    from bench import native_compare as nc  # at call time: native_compare imports this module

    metric = {"consumer": "e2e", "confirm": "publish"}[kind]
    cell = shape_cell(rows.measure_s, nc.LAG_LIMIT_MS, library)
    seconds = int(WARMUP_S + rows.measure_s)

    def native() -> dict[str, Any]:
        run = run_perf_test(brokers.target().address, dict(brokers.target().client), seconds)
        rows.console.print(f"  PerfTest {kind}: p50 {run[kind]['p50_ms']:.3f} ms p99 {run[kind]['p99_ms']:.3f} ms")
        return {"tool": f"PerfTest {PERF_TEST[2]} ({run['command']})", **run[kind], "other": run}

    with nc.fresh_brokers(cell, rows.workdir) as brokers:
        trials = rows._alternate(
            native, lambda: nc.figures(nc.sixnines(cell, brokers, rows.lake, rows.console), metric), metric
        )
    return {
        "shape": "RabbitMQ transient classic queue, 1 KiB @ 1000/s, confirms, one producer, one auto-ack consumer",
        "compares": f"PerfTest {kind} latency vs sixnines {metric} from sent (client: {library})",
        **nc._latency_summary(trials),
        "notes": NOTES,
    }
