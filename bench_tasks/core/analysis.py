"""Pure analysis of one cell's raw samples: message accounting, latency series, generator health.

Inputs are the landed Arrow tables; nothing here does I/O. Only `measure`-phase messages (by intended
time) count in the results; the latency series of all phases are still returned for the interval log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .backlog import BacklogSummary, summarize_backlog
from .percentiles import LatencySummary, summarize


@dataclass(frozen=True)
class Accounting:
    """Where every message went. `lost` = sent but never received (e2e) or never answered (publish/rtt)."""

    scheduled: int
    sent: int
    send_errors: int
    acknowledged: int
    received: int
    duplicated: int
    lost: int
    acknowledged_but_lost: int
    relayed: int | None = None  # chain: messages that reached a relay (so lost - (sent - relayed) died on hop 2)

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)


@dataclass(frozen=True)
class Series:
    """One latency series: when each sample was intended, and its latency from intended and from sent."""

    at_ns: np.ndarray
    from_intended_ns: np.ndarray
    from_sent_ns: np.ndarray


@dataclass
class CellAnalysis:
    accounting: Accounting  # measure phase
    accounting_all_phases: Accounting
    metrics: dict[str, dict[str, LatencySummary]]  # metric -> basis -> measure-phase summary
    lag: LatencySummary  # schedule lag (actual − intended send), measure phase
    target_rate_per_s: float
    achieved_rate_per_s: float
    backlog: BacklogSummary | None = None  # measure phase: sent and not yet arrived (core.backlog)
    series: dict[str, Series] = field(repr=False, default_factory=dict)  # all phases

    @classmethod
    def from_dict(cls, d: dict) -> CellAnalysis:
        """The analysis `to_dict` recorded when the cell landed, without its per-sample series: what a cell's
        report and tables are rebuilt from when its raw samples are gone (pruned) or not at hand."""
        gen = d["generator"]
        return cls(
            accounting=Accounting(**d["accounting"]),
            accounting_all_phases=Accounting(**d["accounting_all_phases"]),
            metrics={m: {b: LatencySummary.from_dict(s) for b, s in by.items()} for m, by in d["metrics"].items()},
            lag=LatencySummary.from_dict(gen["schedule_lag"]),
            target_rate_per_s=gen["target_rate_per_s"],
            achieved_rate_per_s=gen["achieved_rate_per_s"],
            backlog=BacklogSummary.from_dict(d["backlog"]) if d.get("backlog") else None,
        )

    def to_dict(self) -> dict:
        return {
            "accounting": self.accounting.to_dict(),
            "accounting_all_phases": self.accounting_all_phases.to_dict(),
            "metrics": {m: {b: s.to_dict() for b, s in by.items()} for m, by in self.metrics.items()},
            "generator": {
                "schedule_lag": self.lag.to_dict(),
                "target_rate_per_s": self.target_rate_per_s,
                "achieved_rate_per_s": self.achieved_rate_per_s,
            },
            "backlog": None if self.backlog is None else self.backlog.to_dict(),
        }


def _np(table: pa.Table, column: str, null: int = -1) -> np.ndarray:
    return pc.fill_null(table[column], null).to_numpy().astype(np.int64, copy=False)


def leaders_at(partition: np.ndarray, at_ns: np.ndarray, changes: list[dict[str, int]]) -> np.ndarray:
    """The leader of each sample's partition at its time, from a timeline of `{at_ns, partition, leader}`
    changes (-1 where the timeline knows nothing yet). The timeline comes from the cluster's own metadata,
    polled for the whole cell, so a burst delivered right after a failover is credited to the new leader."""
    out = np.full(np.asarray(partition).shape, -1, dtype=np.int32)
    for p in {c["partition"] for c in changes}:
        timeline = sorted((c["at_ns"], c["leader"]) for c in changes if c["partition"] == p)
        times = np.array([t for t, _ in timeline], dtype=np.int64)
        leaders = np.array([leader for _, leader in timeline], dtype=np.int32)
        rows = np.asarray(partition) == p
        index = np.searchsorted(times, np.asarray(at_ns)[rows], side="right") - 1
        out[rows] = np.where(index >= 0, leaders[np.maximum(index, 0)], -1)
    return out


def first_receipts(received: pa.Table) -> tuple[pa.Table, int]:
    """Each (producer, seq) once, at its earliest receipt; plus how many receipts were duplicates."""
    if received.num_rows == 0:
        return received, 0
    ordered = received.sort_by([("producer_id", "ascending"), ("seq", "ascending"), ("received_ns", "ascending")])
    pid, seq = _np(ordered, "producer_id"), _np(ordered, "seq")
    first = np.ones(pid.size, dtype=bool)
    first[1:] = (pid[1:] != pid[:-1]) | (seq[1:] != seq[:-1])
    return ordered.filter(pa.array(first)), int(pid.size - first.sum())


def _keys(table: pa.Table) -> np.ndarray:
    return _np(table, "producer_id") << 40 | _np(table, "seq")


def account(sent: pa.Table, received: pa.Table | None, measurement: str, relayed: pa.Table | None = None) -> Accounting:
    """Count every message of `sent` (already cut to the phases wanted) and its receipts; for a service
    chain, `relayed` holds the relays' own receipts (hop 1) and `received` the final consumers' (hop 2)."""
    sent_ok = pc.is_valid(sent["sent_ns"])
    acked = pc.is_valid(sent["acked_ns"])
    n_sent = int(pc.sum(sent_ok).as_py() or 0)
    n_acked = int(pc.sum(acked).as_py() or 0)
    n_received = duplicated = acked_lost = 0
    n_relayed = None
    if measurement == "chain" and relayed is not None:
        n_relayed = int(np.isin(_keys(sent), _keys(relayed)).sum())
    if measurement in ("e2e", "chain") and received is not None:
        unique, duplicated = first_receipts(received)
        keys_sent = _keys(sent)
        keys_recv = _keys(unique)
        got = np.isin(keys_sent, keys_recv)
        n_received = int(got.sum())
        lost = int((sent_ok.to_numpy(zero_copy_only=False) & ~got).sum())
        acked_lost = int((acked.to_numpy(zero_copy_only=False) & ~got).sum())
    else:
        lost = n_sent - n_acked
    return Accounting(
        scheduled=sent.num_rows,
        sent=n_sent,
        send_errors=sent.num_rows - n_sent,
        acknowledged=n_acked,
        received=n_received,
        duplicated=duplicated,
        lost=lost,
        acknowledged_but_lost=acked_lost,
        relayed=n_relayed,
    )


def latency_series(sent: pa.Table, received: pa.Table, measurement: str, acked_metric: str | None) -> dict[str, Series]:
    """Every metric this cell's data supports, over all phases."""
    out: dict[str, Series] = {}
    if measurement in ("e2e", "chain") and received.num_rows:
        unique, _ = first_receipts(received)
        r, i, s = _np(unique, "received_ns"), _np(unique, "intended_ns"), _np(unique, "sent_ns")
        out["e2e"] = Series(i, r - i, r - s)  # a chain's total: final receipt against the producer's times
        if measurement == "chain":
            # Per hop, both bases: hop 1 ends when the relay got the message; hop 2 starts then (response
            # time, relay processing included) or when the relay actually forwarded it (service time).
            relayed = unique.filter(pc.is_valid(unique["relay_received_ns"]))
            i, s, r = _np(relayed, "intended_ns"), _np(relayed, "sent_ns"), _np(relayed, "received_ns")
            rr, rs = _np(relayed, "relay_received_ns"), _np(relayed, "relay_sent_ns")
            out["hop1"] = Series(i, rr - i, rr - s)
            out["hop2"] = Series(i, r - rr, r - rs)
    if acked_metric:
        done = sent.filter(pc.is_valid(sent["acked_ns"]))
        a, i, s = _np(done, "acked_ns"), _np(done, "intended_ns"), _np(done, "sent_ns")
        out[acked_metric] = Series(i, a - i, a - s)
    return out


def analyze(
    sent: pa.Table,
    received: pa.Table,
    measurement: str,
    acked_metric: str | None,
    measure_window_ns: tuple[int, int],
    target_rate_per_s: float,
    relayed: pa.Table | None = None,
) -> CellAnalysis:
    """`acked_metric`: what an ack means for this cell ('publish', 'rtt', or None when there are none);
    `relayed`: a service chain's hop-1 receipts."""
    start, end = measure_window_ns
    in_measure = pc.equal(sent["phase"], "measure")
    sent_m = sent.filter(in_measure)
    received_m = received.filter(pc.equal(received["phase"], "measure"))
    relayed_m = None if relayed is None else relayed.filter(pc.equal(relayed["phase"], "measure"))
    series = latency_series(sent, received, measurement, acked_metric)
    metrics: dict[str, dict[str, LatencySummary]] = {}
    for name, s in series.items():
        keep = (s.at_ns >= start) & (s.at_ns < end)
        metrics[name] = {
            "intended": summarize(s.from_intended_ns[keep]),
            "sent": summarize(s.from_sent_ns[keep]),
        }
    done = sent_m.filter(pc.is_valid(sent_m["sent_ns"]))
    lag = summarize(_np(done, "sent_ns") - _np(done, "intended_ns"))
    measure_s = (end - start) / 1e9
    # Achieved: what actually went out during the window, whenever it was due; a generator that fell behind
    # sends its measure phase's messages late, so counting those instead would report the target it missed.
    went_out = _np(sent.filter(pc.is_valid(sent["sent_ns"])), "sent_ns")
    sent_in_window = int(np.count_nonzero((went_out >= start) & (went_out < end)))
    arrived = arrivals(series, measurement)
    return CellAnalysis(
        accounting=account(sent_m, received_m, measurement, relayed_m),
        accounting_all_phases=account(sent, received, measurement, relayed),
        metrics=metrics,
        lag=lag,
        target_rate_per_s=target_rate_per_s,
        achieved_rate_per_s=sent_in_window / measure_s if measure_s > 0 else 0.0,
        backlog=summarize_backlog(went_out, arrived, measure_window_ns),
        series=series,
    )


def arrivals(series: dict[str, Series], measurement: str) -> np.ndarray:
    """When each message arrived, any phase: its first receipt (e2e; a chain's at its final consumer), or its
    acknowledgement or reply (publish, rtt). A measurement without its series had nothing arrive."""
    found = series.get("e2e" if measurement == "chain" else measurement)
    return np.array([], np.int64) if found is None else found.at_ns + found.from_intended_ns


def arrival_rate(analysis: CellAnalysis, measurement: str, window_ns: tuple[int, int]) -> float:
    """Messages per second that arrived (a first receipt, or an acknowledgement for publish/rtt) within
    `window_ns`, whenever they were meant to be sent: what the receiving side kept up with."""
    arrived = arrivals(analysis.series, measurement)
    start, end = window_ns
    if end <= start:
        return 0.0
    return float(np.count_nonzero((arrived >= start) & (arrived < end))) / ((end - start) / 1e9)
