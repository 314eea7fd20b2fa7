"""bench_tasks.interop.omb_result: a cell's raw rows as OMB's TestResult, on a tiny literal cell.

The cell: one producer, measure phase 10–30 s in two 10 s intervals. Messages intended at 5 s (warmup), 12,
15, 18 (refused by the client), 22, 25, 27 (acknowledged, never received) and 31 s (cooldown); each sent
1 ms after its intended time (the one at 15 s: 3 ms), acknowledged 2 ms after sending, received 5 ms after.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from bench_tasks.interop.omb_result import (
    CellSamples,
    ResultMeta,
    intervals,
    quantile_levels,
    quantile_map,
    response_and_service,
    to_test_result,
)
from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA

S, MS = 1_000_000_000, 1_000_000
# TestResult's fields, as OMB's class declares them.
TEST_RESULT_FIELDS = {
    "workload", "driver", "messageSize", "topics", "partitions", "producersPerTopic", "consumersPerTopic",
    "publishRate", "publishErrorRate", "consumeRate", "backlog",
    *(f"{p}{s}" for p in ("publishLatency", "publishDelayLatency", "endToEndLatency")
      for s in ("Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max")),
    *(f"aggregated{p}{s}" for p in ("PublishLatency", "PublishDelayLatency", "EndToEndLatency")
      for s in ("Avg", "50pct", "75pct", "95pct", "99pct", "999pct", "9999pct", "Max", "Quantiles")),
}  # fmt: skip


def _phase(t_s: float) -> str:
    return "warmup" if t_s < 10 else "measure" if t_s < 30 else "cooldown"


def _cell() -> CellSamples:
    intended = [5, 12, 15, 18, 22, 25, 27, 31]
    sent_rows, received_rows = [], []
    for seq, t in enumerate(intended):
        i = t * S
        refused = t == 18
        s = None if refused else i + (3 if t == 15 else 1) * MS
        a = None if refused else s + 2 * MS
        sent_rows.append([0, seq, i, s, a, 0, seq, _phase(t), "Queue full" if refused else None])
        if not refused and t != 27:
            received_rows.append([0, 0, seq, i, s, s + 5 * MS, 0, seq, -1, 0, None, None, _phase(t)])
    sent = pa.Table.from_pylist([dict(zip(SENT_SCHEMA.names, r, strict=True)) for r in sent_rows], SENT_SCHEMA)
    received = pa.Table.from_pylist(
        [dict(zip(RECEIVED_SCHEMA.names, r, strict=True)) for r in received_rows], RECEIVED_SCHEMA
    )
    return CellSamples(sent, received, "e2e", "publish", 10 * S, 30 * S)


META = ResultMeta("omb workload", "kafka b1 p1 …", 1024, 3, 1, 1)


def test_fields_are_exactly_omb_test_result_fields() -> None:
    result = to_test_result(_cell(), META)
    assert set(result) == TEST_RESULT_FIELDS  # OMB's Java reader refuses unknown keys
    json.dumps(result)  # plain JSON
    assert (result["workload"], result["driver"], result["partitions"], result["topics"]) == (
        "omb workload",
        "kafka b1 p1 …",
        3,
        1,
    )


def test_per_interval_rates_and_backlog() -> None:
    result = to_test_result(_cell(), META)
    assert result["publishRate"] == [0.2, 0.3]  # sent at 12.001, 15.003 | 22.001, 25.001, 27.001
    assert result["publishErrorRate"] == [0.1, 0.0]  # the refused message at 18 s
    assert result["consumeRate"] == [0.2, 0.2]
    assert result["backlog"] == [0, 1]  # the message of 27 s was never received


def test_per_interval_latencies_in_omb_units() -> None:
    result = to_test_result(_cell(), META)
    assert result["publishLatencyAvg"] == [2.0, 2.0]  # ms
    assert result["publishLatency50pct"] == [2.0, 2.0]
    assert result["publishLatency75pct"] == [None, None]  # 2 and 3 samples cannot state p75 (needs 4)
    assert result["publishDelayLatency50pct"] == [1000, 1000]  # µs, integers
    assert result["publishDelayLatencyMax"] == [3000, 1000]
    assert result["endToEndLatency50pct"] == [5.0, 5.0]
    assert result["endToEndLatencyMax"] == [5.0, 5.0]


def test_aggregated_over_the_measure_phase() -> None:
    result = to_test_result(_cell(), META)
    assert result["aggregatedPublishLatency50pct"] == 2.0
    assert result["aggregatedPublishDelayLatencyAvg"] == pytest.approx(1400.0)  # (1000·4 + 3000) / 5
    assert result["aggregatedPublishDelayLatency75pct"] == 1000
    assert result["aggregatedPublishDelayLatency95pct"] is None  # 5 samples; p95 needs 20
    assert result["aggregatedPublishDelayLatencyMax"] == 3000
    assert result["aggregatedEndToEndLatencyMax"] == 5.0
    assert result["aggregatedEndToEndLatencyQuantiles"]["100.0"] == 5.0


def test_response_time_is_kept_beside() -> None:
    summary = response_and_service(_cell())
    # e2e: response = 5 ms + the send lag (1 or 3 ms), service = 5 ms
    assert summary["e2e"]["response"]["max"] == pytest.approx(8.0)
    assert summary["e2e"]["service"]["max"] == pytest.approx(5.0)
    assert summary["e2e"]["response"]["count"] == 4
    assert summary["e2e"]["response"]["unsupported"] == ["90", "99", "99.9", "99.99", "99.999", "99.9999"]


def test_quantile_levels_follow_hdrhistograms_ticks() -> None:
    assert quantile_levels(0) == []
    levels = quantile_levels(4, ticks=5)
    assert levels == pytest.approx([0, 10, 20, 30, 40, 50, 55, 60, 65, 70, 75, 100])
    assert len(quantile_levels(10_000)) > 1000  # OMB's percentiles(100): a dense map


def test_quantile_map_keys_are_levels_and_values_observed() -> None:
    q = quantile_map(pa.array([1, 2, 3, 4]).to_numpy() * MS, MS, False)
    assert q["0.0"] == 1.0 and q["50.0"] == 2.0 and q["75.0"] == 3.0 and q["100.0"] == 4.0


def test_intervals_cover_the_measure_phase() -> None:
    assert intervals(0, 25, 10) == [(0, 10), (10, 20), (20, 25)]
    assert intervals(0, 20, 10) == [(0, 10), (10, 20)]
