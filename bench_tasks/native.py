"""The native tools a user would otherwise reach for, run beside sixnines on the same broker (STYLE 17).

- The official NATS CLI (`nats bench pub/sub`, `nats bench service serve/request`, `nats latency`), built from
  the Go module proxy at a pinned version (`go install github.com/nats-io/natscli/nats@…`) into the cache.
- Kafka's own `ProducerPerformance` and `EndToEndLatency` from the `org.apache.kafka:kafka-tools` jars, fetched
  from Maven Central by the same fetcher that brings the broker (`brokers.kafka.tools_classpath`).

This module builds the command lines and reads what the tools print; `bench/native_compare.py` runs them.
Each tool measures its own way, and the parsers keep what it measured, not what one would wish it had:

- `nats bench pub` publishes as fast as it can (closed loop, no schedule); its rate is a ceiling, not a
  latency-bearing load. `nats latency` paces itself by sleeping (adjusting the sleep to hit the rate) and
  measures one way from the actual send (wall clock, publisher and subscriber in one process).
  `nats bench service request` measures each request's round trip from when it was sent, one at a time.
- `ProducerPerformance --throughput -1` sends as fast as the producer takes records; `EndToEndLatency` sends
  one record, waits until it is consumed, then sends the next (closed loop), and prints its percentiles in
  whole milliseconds (it keeps each latency as a truncated `long` of ms). Both run on a fresh JVM, so the
  first seconds carry JIT warm-up.
- sixnines runs open loop on a fixed schedule and reports both from the intended and from the actual send;
  only "from sent" is comparable with the tools above.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SixninesError
from .paths import cache_dir

NATSCLI_MODULE = "github.com/nats-io/natscli/nats"
NATSCLI_VERSION = "v0.5.1"  # the release the comparison was written against; bump here, nowhere else
PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"
_GO_BUILD_TIMEOUT_S = 1800


class NativeToolError(SixninesError):
    """A native tool could not be built, run, or read."""


def natscli(version: str = NATSCLI_VERSION) -> Path:
    """The `nats` binary of `version`, built once with `go install` into `<cache>/natscli/<version>/`."""
    home = cache_dir() / "natscli" / version
    binary = home / "nats"
    if binary.exists():
        return binary
    go = shutil.which("go")
    if go is None:
        raise NativeToolError(f"the Go toolchain (`go`) is needed to build {NATSCLI_MODULE}@{version}")
    home.mkdir(parents=True, exist_ok=True)
    build = home / ".build"
    build.mkdir(exist_ok=True)
    env = {**os.environ, "GOBIN": str(build), "CGO_ENABLED": "0"}
    cmd = [go, "install", f"{NATSCLI_MODULE}@{version}"]
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_GO_BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise NativeToolError(f"go install {NATSCLI_MODULE}@{version} took over {_GO_BUILD_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        raise NativeToolError(f"go install {NATSCLI_MODULE}@{version} failed: {done.stderr.strip()[-800:]}")
    os.replace(build / "nats", binary)  # only a complete build ever has the final name
    shutil.rmtree(build, ignore_errors=True)
    return binary


def natscli_version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return (done.stdout or done.stderr).strip()


def kafka_tool(java: str, libs: Path, main_class: str, args: Sequence[str]) -> list[str]:
    """A Kafka tool's command line on the kafka-tools classpath (the JVM's defaults, as Kafka's scripts use)."""
    return [java, "-Xmx512m", "-cp", f"{libs}/*", main_class, *args]


@dataclass(frozen=True)
class ProducerPerformanceResult:
    records: int
    records_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    percentiles_ms: dict[str, float]


_PP_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \([\d.]+ MB/sec\), (?P<avg>[\d.]+) ms avg latency, "
    r"(?P<max>[\d.]+) ms max latency(?P<rest>.*)"
)
_PP_PERCENTILE = re.compile(r"([\d.]+) ms ([\d.]+)th")


def parse_producer_performance(output: str) -> ProducerPerformanceResult:
    """The final summary line (the one with percentiles) of ProducerPerformance's output."""
    finals = [m for m in _PP_SUMMARY.finditer(output) if "th" in m.group("rest")]
    if not finals:
        raise NativeToolError(f"no ProducerPerformance summary in its output: {output.strip()[-300:]!r}")
    m = finals[-1]
    percentiles = {p: float(v) for v, p in _PP_PERCENTILE.findall(m.group("rest"))}
    return ProducerPerformanceResult(
        int(m.group("records")), float(m.group("rate")), float(m.group("avg")), float(m.group("max")), percentiles
    )


@dataclass(frozen=True)
class EndToEndLatencyResult:
    avg_ms: float
    p50_ms: int  # whole milliseconds, as the tool prints them
    p99_ms: int
    p999_ms: int


def parse_end_to_end_latency(output: str) -> EndToEndLatencyResult:
    avg = re.search(r"Avg latency: ([\d.]+) ms", output)
    pct = re.search(r"Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = (\d+)", output)
    if avg is None or pct is None:
        raise NativeToolError(f"no EndToEndLatency result in its output: {output.strip()[-300:]!r}")
    return EndToEndLatencyResult(float(avg.group(1)), *(int(v) for v in pct.groups()))


def parse_nats_bench_csv(text: str) -> list[dict[str, float | str]]:
    """`nats bench … --csv` rows: rates in msgs/s, latencies in µs (publisher and requester rows carry them)."""
    rows = list(csv.DictReader(io.StringIO(text.lstrip("#"))))
    if not rows:
        raise NativeToolError("nats bench wrote an empty CSV")
    return [{k: v if k in ("RunID", "ClientID") else float(v) for k, v in row.items()} for row in rows]


def latency_percentiles_ms(raw: str, percentiles: Sequence[float] = (50, 99)) -> dict[str, float]:
    """Exact percentiles (nearest rank, like HdrHistogram's) of `nats latency --histogram`'s raw file: one
    latency in ms per line, every message of the run."""
    values = np.array(raw.split(), dtype=np.float64)
    if values.size == 0:
        raise NativeToolError("nats latency recorded no message")
    return {f"{p:g}": float(np.percentile(values, p, method="inverted_cdf")) for p in percentiles} | {
        "count": float(values.size)
    }
