"""The native tools' output, read by each system's `native` module (outputs captured from the pinned versions)."""

from __future__ import annotations

import pytest

from bench_tasks.errors import NativeToolError
from bench_tasks.systems.kafka.native import parse_end_to_end_latency, parse_producer_performance
from bench_tasks.systems.nats.native import latency_percentiles_ms, parse_nats_bench_csv

# kafka-tools 4.3.1 ProducerPerformance: a progress line, then the summary with percentiles.
PRODUCER_PERFORMANCE = """\
SLF4J: Defaulting to no-operation (NOP) logger implementation
260115 records sent, 52023.0 records/sec (4.96 MB/sec), 1907.8 ms avg latency, 2506.0 ms max latency.
1000000 records sent, 110290.062865 records/sec (10.52 MB/sec), 1986.27 ms avg latency, 2836.00 ms max latency, \
2225 ms 50th, 2773 ms 95th, 2826 ms 99th, 2834 ms 99.9th.
"""

END_TO_END_LATENCY = """\
0	295.97551
1000	4.919651
Avg latency: 3.1166 ms
Percentiles: 50th = 1, 99th = 13, 99.9th = 47
"""

# natscli v0.5.1 `nats bench service request --csv`
SERVICE_CSV = (
    "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs,MinLatencyMicroSecs,"
    "AvgLatencyMicroSecs,MaxLatencyMicroSecs,P50LatencyMicroSecs,P90LatencyMicroSecs,P99LatencyMicroSecs,"
    "P99.9LatencyMicroSecs,StdDevLatencyMicroSecs\n"
    "0sv5gH9G4VZP7kSz2ucV1D,P0,6000,3072000,999,1023649.630664,3.001027,30.932000,174.983180,7953.325000,"
    "172.108000,237.602000,323.566000,3841.645000,266.554958\n"
)
SUB_CSV = (
    "#RunID,ClientID,MsgCount,MsgBytes,MsgsPerSec,BytesPerSec,DurationSecs\n"
    "sygTZjZAAJVASWQTdLOxRf,S0,2000000,64000000,1248908,39965061.469203,1.601399\n"
)


def test_producer_performance_takes_the_final_summary() -> None:
    result = parse_producer_performance(PRODUCER_PERFORMANCE)
    assert result.records == 1_000_000
    assert result.records_per_s == pytest.approx(110290.062865)
    assert result.avg_latency_ms == 1986.27 and result.max_latency_ms == 2836.0
    assert result.percentiles_ms == {"50": 2225.0, "95": 2773.0, "99": 2826.0, "99.9": 2834.0}


def test_end_to_end_latency_keeps_whole_milliseconds() -> None:
    result = parse_end_to_end_latency(END_TO_END_LATENCY)
    assert (result.avg_ms, result.p50_ms, result.p99_ms, result.p999_ms) == (3.1166, 1, 13, 47)


def test_nats_bench_csv_rows() -> None:
    (request,) = parse_nats_bench_csv(SERVICE_CSV)
    assert request["ClientID"] == "P0" and request["MsgsPerSec"] == 999.0
    assert (request["P50LatencyMicroSecs"], request["P99LatencyMicroSecs"]) == (172.108, 323.566)
    (sub,) = parse_nats_bench_csv(SUB_CSV)
    assert sub["MsgsPerSec"] == 1248908.0


def test_nats_latency_raw_file_percentiles_are_exact() -> None:
    raw = "\n".join(f"{v:f}" for v in [0.1] * 98 + [0.5, 2.0]) + "\n"
    assert latency_percentiles_ms(raw) == {"50": 0.1, "99": 0.5, "count": 100.0}


@pytest.mark.parametrize(
    "parse", [parse_producer_performance, parse_end_to_end_latency, parse_nats_bench_csv, latency_percentiles_ms]
)
def test_unreadable_output_is_an_error_naming_the_tool(parse: object) -> None:
    with pytest.raises(NativeToolError):
        parse("")  # type: ignore[operator]
