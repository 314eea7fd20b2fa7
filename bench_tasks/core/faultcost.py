"""What each fault of a cell cost, from the cell's own samples: recovery, loss, and leadership around it.

A fault's window runs from when it fired to when the next one fired (or the measure phase ended); messages are
charged to the fault whose window holds their intended send time, so a backlog delivered late after a stall is
counted where it was meant to be sent, and so are its duplicates. An arrival is a message's first receipt (e2e,
chain) or its acknowledgement (publish, rtt). Times are seconds from the start of the measure phase (the matrix's
`at_s` clock). When the latency came back (`p99_recovery_s`) is `core.recovery`'s rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .analysis import _np, account, first_receipts
from .recovery import band_limit, baseline_p99, recovery_s, response_times

NS_PER_S = 1_000_000_000


def fault_costs(
    faults: Sequence[Mapping[str, Any]],
    sent: pa.Table,
    received: pa.Table,
    measurement: str,
    measure_window_ns: tuple[int, int],
    leader_changes: Sequence[Mapping[str, int]] = (),
) -> list[dict[str, Any]]:
    """Each fired fault (as recorded: kind, start_ns, end_ns, node, …) with what it cost added."""
    start, end = measure_window_ns
    intended, arrived = _arrivals(sent, received, measurement)
    ordered = sorted(faults, key=lambda f: f["start_ns"])
    measured = pc.and_(pc.greater_equal(sent["intended_ns"], start), pc.less(sent["intended_ns"], end))
    times, latency = response_times(sent.filter(measured), received, measurement)
    first = int(ordered[0]["start_ns"]) if ordered else end
    baseline = baseline_p99(times, latency, start, first) if ordered else None
    band = band_limit(times, latency, start, first, baseline)
    out = []
    for i, fault in enumerate(ordered):
        begin = int(fault["start_ns"])
        until = int(ordered[i + 1]["start_ns"]) if i + 1 < len(ordered) else max(end, begin)
        acc = account(_meant(sent, begin, until), _meant(received, begin, until), measurement)
        after = arrived[intended >= begin]
        out.append(
            {
                **fault,
                "fired_s": _seconds(begin - start),
                "ended_s": None if fault.get("end_ns") is None else _seconds(int(fault["end_ns"]) - start),
                "window_end_s": _seconds(until - start),
                "leader_before": _leader_at(leader_changes, begin),
                "leader_after": _leader_at(leader_changes, until),
                "first_arrival_after_s": _seconds(int(after.min()) - begin) if after.size else None,
                "max_arrival_gap_s": _max_gap(arrived, begin, until),
                "p99_baseline_ms": None if baseline is None else round(baseline / 1e6, 6),
                "p99_band_ms": None if band is None else round(band / 1e6, 6),
                "p99_recovery_s": recovery_s(times, latency, begin, end, band),
                "scheduled": acc.scheduled,
                "sent": acc.sent,
                "send_errors": acc.send_errors,
                "lost": acc.lost,
                "duplicated": acc.duplicated,
                "acknowledged_but_lost": acc.acknowledged_but_lost,
            }
        )
    return out


def _meant(table: pa.Table, begin: int, until: int) -> pa.Table:
    """The rows of messages meant to be sent in [begin, until): a fault's share of sent or received rows."""
    return table.filter(pc.and_(pc.greater_equal(table["intended_ns"], begin), pc.less(table["intended_ns"], until)))


def _arrivals(sent: pa.Table, received: pa.Table, measurement: str) -> tuple[np.ndarray, np.ndarray]:
    """(intended send time, arrival time) of every message that arrived."""
    if measurement in ("e2e", "chain"):
        unique, _ = first_receipts(received)
        return _np(unique, "intended_ns"), _np(unique, "received_ns")
    done = sent.filter(pc.is_valid(sent["acked_ns"]))
    return _np(done, "intended_ns"), _np(done, "acked_ns")


def _max_gap(arrived: np.ndarray, begin: int, until: int) -> float:
    """The longest time without an arrival from `begin` to `until` (a fault nobody recovered from: all of it)."""
    inside = np.sort(arrived[(arrived >= begin) & (arrived <= until)])
    points = np.concatenate(([begin], inside, [until]))
    return _seconds(int(np.diff(points).max())) if points.size > 1 else 0.0


def _leader_at(changes: Sequence[Mapping[str, int]], at_ns: int) -> int | None:
    """Who led the measured route (partition 0) at `at_ns`, by the cell's leader timeline; None: not known."""
    known = [c for c in changes if c["partition"] == 0 and c["at_ns"] <= at_ns]
    return int(max(known, key=lambda c: c["at_ns"])["leader"]) if known else None


def _seconds(ns: int) -> float:
    return round(ns / NS_PER_S, 6)
