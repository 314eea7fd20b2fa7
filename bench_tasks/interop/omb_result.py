"""One sixnines cell as an OpenMessaging Benchmark result (the JSON of OMB's `TestResult` class).

OMB's latency fields are service times, and this export keeps OMB's definitions so its charts and readers
mean what they always meant:
  publishLatency*       acknowledgement − actual send, ms            (sixnines metric `publish`, basis `sent`)
  publishDelayLatency*  actual send − intended send, µs (integers)   (sixnines' schedule lag)
  endToEndLatency*      receipt − actual send, ms                    (sixnines metric `e2e`, basis `sent`)
sixnines' response time (from the intended send: what a user of a fixed-rate system waits, coordinated
omission included) has no OMB field; `sidecar` carries it beside the file, with the cell's identity.

Only measure-phase messages (by intended send time) count in the latencies, as in every sixnines table; the
per-interval rates and backlog count every message in the interval's wall-clock window, as OMB's do.
Percentiles are exact (inverted CDF over the raw samples, the tables' definition); one the sample count
cannot support (fewer than 1/(1−p) samples) is null, never a number. Pure functions on Arrow tables.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..core.analysis import latency_series
from ..core.percentiles import PERCENTILES, is_supported, summarize

# OMB's percentile fields (name suffix → percentile), in its order.
OMB_PERCENTILES: tuple[tuple[str, str], ...] = (
    ("50pct", "50"),
    ("75pct", "75"),
    ("95pct", "95"),
    ("99pct", "99"),
    ("999pct", "99.9"),
    ("9999pct", "99.99"),
)
QUANTILE_TICKS_PER_HALF_DISTANCE = 100  # OMB fills its quantile maps with HdrHistogram's percentiles(100)
NS_PER_MS = 1_000_000
NS_PER_US = 1_000
SIDECAR_SCHEMA_VERSION = 1  # 1 — first version: identity, response and service time per metric, accounting
SERVICE_TIME_NOTE = (
    "OMB's latency fields are service times, exported as OMB defines them: publishLatency* = acknowledgement "
    "minus actual send (ms), endToEndLatency* = receipt minus actual send (ms), publishDelayLatency* = actual "
    "minus intended send (µs). sixnines' response time (from the intended send time of its fixed-rate "
    "schedule, which includes any queueing behind a stall) has no OMB field: it is under `latency_ms` here. "
    "Percentiles the sample count cannot support are null (a Java reader of TestResult reads null as 0)."
)


@dataclass(frozen=True)
class CellSamples:
    """One run of one cell: its raw rows (all phases) and what the tables need to cut and name them."""

    sent: pa.Table
    received: pa.Table
    measurement: str
    acked_metric: str | None
    measure_start_ns: int
    measure_end_ns: int


@dataclass(frozen=True)
class ResultMeta:
    """TestResult's descriptive fields."""

    workload: str
    driver: str
    message_size: int
    partitions: int
    producers: int
    consumers: int


def percentile_value(values: np.ndarray, percentile: str) -> int | None:
    """Exact inverted-CDF percentile of int values, or None when the count cannot support it."""
    if values.size == 0 or not is_supported(percentile, int(values.size)):
        return None
    return int(np.quantile(values, float(Decimal(percentile) / 100), method="inverted_cdf"))


def latency_fields(prefix: str, values_ns: np.ndarray, unit_ns: int, integral: bool) -> dict[str, Any]:
    """`<prefix>Avg`, `<prefix>50pct` … `<prefix>Max` of one sample set, in OMB's unit (ms, or integer µs)."""
    values = np.asarray(values_ns, dtype=np.int64)

    def scale(v: int | None) -> float | int | None:
        if v is None:
            return None
        return int(v // unit_ns) if integral else v / unit_ns

    digits = len(str(unit_ns)) - 1  # to the ns: ms with 6 decimals, µs with 3
    out: dict[str, Any] = {f"{prefix}Avg": round(float(values.mean()) / unit_ns, digits) if values.size else None}
    for suffix, percentile in OMB_PERCENTILES:
        out[f"{prefix}{suffix}"] = scale(percentile_value(values, percentile))
    out[f"{prefix}Max"] = scale(int(values.max())) if values.size else None
    return out


def quantile_levels(count: int, ticks: int = QUANTILE_TICKS_PER_HALF_DISTANCE) -> list[float]:
    """The percentile levels HdrHistogram's percentile iteration visits (Java's tick rule: `ticks` steps per
    halving of the distance to 100 %), up to the last level `count` samples support, then 100 (the max)."""
    if count == 0:
        return []
    levels, level = [], 0.0
    while 100.0 / (100.0 - level) <= count:
        levels.append(level)
        halvings = int(np.log(100.0 / (100.0 - level)) / np.log(2))
        level += 100.0 / (ticks * 2 ** (halvings + 1))
    return [*levels, 100.0]


def quantile_map(values_ns: np.ndarray, unit_ns: int, integral: bool) -> dict[str, float | int]:
    """OMB's `aggregated*Quantiles`: percentile level → latency; exact values at HdrHistogram's levels."""
    values = np.asarray(values_ns, dtype=np.int64)
    levels = quantile_levels(int(values.size))
    if not levels:
        return {}
    found = np.quantile(values, np.array(levels) / 100.0, method="inverted_cdf")
    found[-1] = values.max()  # level 100 is the max itself, never a bucket's edge
    pairs = zip(levels, (int(v) for v in found), strict=True)
    return {repr(level): (v // unit_ns if integral else v / unit_ns) for level, v in pairs}


def intervals(start_ns: int, end_ns: int, interval_ns: int) -> list[tuple[int, int]]:
    """The measure phase cut into OMB's reporting intervals; the last one may be shorter."""
    edges = [*range(start_ns, end_ns, interval_ns), end_ns]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


def _np(table: pa.Table, column: str) -> np.ndarray:
    return pc.fill_null(table[column], -1).to_numpy().astype(np.int64, copy=False)


def _in(at: np.ndarray, window: tuple[int, int]) -> np.ndarray:
    return (at >= window[0]) & (at < window[1])


@dataclass(frozen=True)
class _Latencies:
    """Each OMB latency as (intended time, value ns) arrays, measure phase or not."""

    publish: tuple[np.ndarray, np.ndarray]
    delay: tuple[np.ndarray, np.ndarray]
    e2e: tuple[np.ndarray, np.ndarray]


def _latencies(cell: CellSamples) -> _Latencies:
    series = latency_series(cell.sent, cell.received, cell.measurement, cell.acked_metric)
    empty = (np.array([], np.int64), np.array([], np.int64))
    publish = series.get("publish")
    e2e = series.get("e2e")
    done = cell.sent.filter(pc.is_valid(cell.sent["sent_ns"]))
    intended = _np(done, "intended_ns")
    return _Latencies(
        publish=(publish.at_ns, publish.from_sent_ns) if publish else empty,
        delay=(intended, _np(done, "sent_ns") - intended),
        e2e=(e2e.at_ns, e2e.from_sent_ns) if e2e else empty,
    )


def _measured(pair: tuple[np.ndarray, np.ndarray], window: tuple[int, int]) -> np.ndarray:
    at, values = pair
    return values[_in(at, window)]


def _series_lists(lat: _Latencies, windows: Sequence[tuple[int, int]]) -> dict[str, list[Any]]:
    """Per interval, OMB's `publishLatency*`, `publishDelayLatency*` and `endToEndLatency*` lists."""
    out: dict[str, list[Any]] = {}
    for window in windows:
        fields = {
            **latency_fields("publishLatency", _measured(lat.publish, window), NS_PER_MS, False),
            **latency_fields("publishDelayLatency", _measured(lat.delay, window), NS_PER_US, True),
            **latency_fields("endToEndLatency", _measured(lat.e2e, window), NS_PER_MS, False),
        }
        for name, value in fields.items():
            out.setdefault(name, []).append(value)
    return out


def _rates(cell: CellSamples, windows: Sequence[tuple[int, int]]) -> dict[str, list[Any]]:
    """Per interval: messages sent, refused and received per second, and the backlog at its end."""
    sent_ns = _np(cell.sent, "sent_ns")
    failed = cell.sent.filter(pc.is_valid(cell.sent["error"]))
    failed_at = _np(failed, "intended_ns")
    received_ns = _np(cell.received, "received_ns")
    subscriptions = 1 if cell.measurement in ("e2e", "chain") else 0
    out: dict[str, list[Any]] = {"publishRate": [], "publishErrorRate": [], "consumeRate": [], "backlog": []}
    for window in windows:
        seconds = (window[1] - window[0]) / 1e9
        out["publishRate"].append(int(_in(sent_ns, window).sum()) / seconds)
        out["publishErrorRate"].append(int(_in(failed_at, window).sum()) / seconds)
        out["consumeRate"].append(int(_in(received_ns, window).sum()) / seconds)
        sent_so_far = int(((sent_ns >= 0) & (sent_ns < window[1])).sum())
        received_so_far = int(((received_ns >= 0) & (received_ns < window[1])).sum())
        out["backlog"].append(max(0, subscriptions * sent_so_far - received_so_far))
    return out


def _aggregated(lat: _Latencies, window: tuple[int, int]) -> dict[str, Any]:
    publish, delay, e2e = (_measured(p, window) for p in (lat.publish, lat.delay, lat.e2e))
    return {
        **latency_fields("aggregatedPublishLatency", publish, NS_PER_MS, False),
        **latency_fields("aggregatedPublishDelayLatency", delay, NS_PER_US, True),
        **latency_fields("aggregatedEndToEndLatency", e2e, NS_PER_MS, False),
        "aggregatedPublishLatencyQuantiles": quantile_map(publish, NS_PER_MS, False),
        "aggregatedPublishDelayLatencyQuantiles": quantile_map(delay, NS_PER_US, True),
        "aggregatedEndToEndLatencyQuantiles": quantile_map(e2e, NS_PER_MS, False),
    }


def to_test_result(cell: CellSamples, meta: ResultMeta, interval_s: float = 10.0) -> dict[str, Any]:
    """The TestResult JSON object of one run of a cell, field for field as OMB's class names them."""
    window = (cell.measure_start_ns, cell.measure_end_ns)
    windows = intervals(*window, int(interval_s * 1e9))
    lat = _latencies(cell)
    return {
        "workload": meta.workload,
        "driver": meta.driver,
        "messageSize": meta.message_size,
        "topics": 1,
        "partitions": meta.partitions,
        "producersPerTopic": meta.producers,
        "consumersPerTopic": meta.consumers,
        **_rates(cell, windows),
        **_series_lists(lat, windows),
        **_aggregated(lat, window),
    }


def response_and_service(cell: CellSamples) -> dict[str, dict[str, Any]]:
    """Per metric, sixnines' own summary in ms of both bases (the figures OMB's fields cannot carry)."""
    window = (cell.measure_start_ns, cell.measure_end_ns)
    out: dict[str, dict[str, Any]] = {}
    for metric, s in latency_series(cell.sent, cell.received, cell.measurement, cell.acked_metric).items():
        keep = _in(s.at_ns, window)
        out[metric] = {
            name: _summary_ms(values[keep])
            for name, values in (("response", s.from_intended_ns), ("service", s.from_sent_ns))
        }
    return out


def _summary_ms(values_ns: np.ndarray) -> dict[str, Any]:
    s = summarize(values_ns)
    ms = s.as_ms()
    return {
        "count": s.count,
        **{f"p{p}": ms[p] for p in PERCENTILES},
        "max": ms["max"],
        "unsupported": [p for p in PERCENTILES if s.count and ms[p] is None],
    }
