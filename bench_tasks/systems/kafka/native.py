"""Kafka's own perf tools beside sixnines (`bench/native_compare.py`): `ProducerPerformance` and `EndToEndLatency`
from the `org.apache.kafka:kafka-tools` jars (fetched by the release fetcher, `release.tools_classpath`), and
their output read.

What they measure, so a comparison says what it compares:
- `ProducerPerformance --throughput -1` sends as fast as the producer takes records (closed loop).
- `EndToEndLatency` sends one record, waits until it is consumed, then sends the next (closed loop), with
  producer `linger.ms=0` and consumer `fetch.max.wait.ms=0`, and prints its percentiles in whole milliseconds
  (it keeps each latency as a truncated `long` of ms).
- Both run on a fresh JVM, so their first seconds carry JIT warm-up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...errors import NativeToolError

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
END_TO_END_LATENCY = "org.apache.kafka.tools.EndToEndLatency"


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
