"""When a fault's latency came back: the rolling p99 of response time against its value before the faults.

The measure is the report's and the timeline's: response time from the intended send (a message's first receipt,
or its acknowledgement in publish and rtt cells, minus its intended send time), by intended send time. A message
that never arrived (lost, refused by the client, never acknowledged) counts as slower than any that did: a
route that answers nothing has not recovered. Windows are WINDOW_NS of intended send time sliding by STEP_NS; a
window's p99 is the inverted-CDF sample (`core.percentiles`), its maximum when it holds fewer than 100.

Recovered means back in the band the latency kept before the faults, the highest of three bounds:
- 20 % above the p99 of the whole stretch before the first fault;
- the highest rolling p99 of that stretch: the route's own noise (on a JetStream R3 route at 1000/s with a p99 of
  1.8 ms, single windows reached 3.2 ms before any fault and again after it, and 20 % alone called it never
  recovered);
- the p99 a window of that stretch's samples reaches SIGMAS standard errors up: a window's p99 of n samples is
  itself a sample, whose rank wanders by sqrt(0.99 * 0.01 * n). A few seconds before a fault hold only a few
  independent windows, and a CI run's JetStream R3 cell (baseline 3.36 ms, highest window 3.77 ms) was called
  never recovered while its windows after the stall ran at 3.7-5.8 ms against 1,035 ms during it.
The band's width barely moves a recovery time: a backlog drains at about a millisecond of latency per millisecond,
so a band 2 ms wider is reached 2 ms sooner.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .analysis import _keys, _np, first_receipts

WINDOW_NS = 1_000_000_000
STEP_NS = 100_000_000
TOLERANCE = 0.20  # recovered: the rolling p99 within 20 % above its value before the faults
SIGMAS = 3.0  # how far above the baseline's p99 a window's own sampling noise may reach
UNBOUNDED = np.iinfo(np.int64).max  # the response time of a message that never arrived


def response_times(sent: pa.Table, received: pa.Table, measurement: str) -> tuple[np.ndarray, np.ndarray]:
    """(intended send time, response time) of every scheduled message, ordered by intended time."""
    intended = _np(sent, "intended_ns")
    if measurement in ("e2e", "chain"):
        unique, _ = first_receipts(received)
        keys, arrived = _keys(unique), _np(unique, "received_ns")
        order = np.argsort(keys)
        keys, arrived = keys[order], arrived[order]
        wanted = _keys(sent)
        if keys.size == 0:
            got, done = np.zeros(wanted.size, dtype=bool), np.zeros(wanted.size, dtype=np.int64)
        else:
            at = np.minimum(np.searchsorted(keys, wanted), keys.size - 1)
            got, done = keys[at] == wanted, arrived[at]
    else:
        done = _np(sent, "acked_ns")
        got = pc.is_valid(sent["acked_ns"]).to_numpy(zero_copy_only=False)
    latency = np.where(got, done - intended, UNBOUNDED)
    order = np.argsort(intended, kind="stable")
    return intended[order], latency[order]


def p99(values: np.ndarray) -> int | None:
    """The inverted-CDF p99 (the maximum of fewer than 100 values); None of none."""
    if values.size == 0:
        return None
    rank = (99 * values.size + 99) // 100 - 1  # ceil(0.99 n) - 1, in integers
    return int(np.partition(values, rank)[rank])


def baseline_p99(intended: np.ndarray, latency: np.ndarray, start_ns: int, first_fault_ns: int) -> int | None:
    """The p99 of the measure phase before the first fault fired (None: nothing was meant to be sent then)."""
    inside = (intended >= start_ns) & (intended < first_fault_ns)
    return p99(latency[inside])


def band_limit(
    intended: np.ndarray, latency: np.ndarray, start_ns: int, first_fault_ns: int, baseline_ns: int | None
) -> float | None:
    """The highest rolling p99 that counts as recovered (see the module docstring); None without a baseline."""
    if baseline_ns is None:
        return None
    starts = np.arange(start_ns, first_fault_ns - WINDOW_NS + 1, STEP_NS, dtype=np.int64)
    windows = [window_p99(intended, latency, s) for s in starts]
    inside = (intended >= start_ns) & (intended < first_fault_ns)
    per_window = np.count_nonzero(inside) * WINDOW_NS / max(first_fault_ns - start_ns, 1)
    # answered before the first fault fired: a message still in flight then may be the fault's (1 s behind a stall)
    answered = inside & (latency < first_fault_ns - intended)
    noise = sampling_reach(latency[answered], per_window)
    return max([baseline_ns * (1 + TOLERANCE), noise, *(w for w in windows if w is not None)])


def sampling_reach(before: np.ndarray, per_window: float) -> int:
    """The baseline's quantile 0.99 + SIGMAS * sqrt(0.99 * 0.01 / n): how high the p99 of a window of n samples
    drawn from the baseline reaches by chance (its maximum when n is under 900)."""
    if before.size == 0:
        return 0
    quantile = min(1.0, 0.99 + SIGMAS * math.sqrt(0.99 * 0.01 / max(per_window, 1.0)))
    rank = max(math.ceil(quantile * before.size) - 1, 0)
    return int(np.partition(before, rank)[rank])


def recovery_s(
    intended: np.ndarray, latency: np.ndarray, fired_ns: int, end_ns: int, limit: float | None
) -> float | None:
    """Seconds from `fired_ns` to the start of the first window whose p99 is at most `limit` (`band_limit`) and
    stays so for one window more (every window starting up to WINDOW_NS later is within too); windows end by
    `end_ns` (the measure phase's end). None: no band, or it never recovered within the cell."""
    if limit is None:
        return None
    starts = np.arange(fired_ns, end_ns - WINDOW_NS + 1, STEP_NS, dtype=np.int64)
    within = np.array([_window_within(intended, latency, s, limit) for s in starts], dtype=bool)
    stay = WINDOW_NS // STEP_NS  # windows after the first that must be within too
    for k in range(within.size - stay):
        if within[k : k + stay + 1].all():
            return round((int(starts[k]) - fired_ns) / 1e9, 6)
    return None


def _window_within(intended: np.ndarray, latency: np.ndarray, start_ns: int, limit: float) -> bool:
    """Is the p99 of messages meant in [start, start + WINDOW_NS) at most `limit` (an empty window: no)?"""
    value = window_p99(intended, latency, start_ns)
    return value is not None and value <= limit


def window_p99(intended: np.ndarray, latency: np.ndarray, start_ns: int) -> int | None:
    """The p99 of messages meant in [start, start + WINDOW_NS); None of an empty window."""
    lo, hi = np.searchsorted(intended, [start_ns, start_ns + WINDOW_NS], side="left")
    return p99(latency[lo:hi])
