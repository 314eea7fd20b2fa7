"""Moments a worker could not run at all, as harness facts (docs/workers.md, "Self-facts").

A worker program measures them itself (the JVM worker's hiccup meter: a thread that asks to wake every millisecond
and records each wake-up a millisecond or more late), and its runtime may say why (a JVM safepoint stops every Java
thread: a GC pause, a deoptimisation). A worker stopped by SIGSTOP, throttled by a CPU share or starved by the host
shows up the same way. Any pause that began in the measure phase and lasted longer than `max_schedule_lag_ms` held
every message on its way through the worker that long, so the cell fails as harness saturation
(`saturation.verdict`), never as the system's latency. A pause a declared fault put on the worker (a relay's stall)
is the fault's: it is counted apart (`declared`) and judges nothing. Pure: the worker's measurements come in, a
summary goes out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

UNEXPLAINED = "stopped, throttled or starved of CPU"


@dataclass(frozen=True)
class Pause:
    """A moment a worker could not run: when it began (CLOCK_MONOTONIC), how long, and why if known."""

    start_ns: int
    duration_ns: int
    cause: str | None = None


def summarize_pauses(
    hiccups: Sequence[Sequence[int]],
    explained: Sequence[Pause],
    window_ns: tuple[int, int],
    declared: Sequence[Pause] = (),
) -> dict[str, Any]:
    """`hiccups`: [start_ns, duration_ns] the worker measured; `explained`: pauses its runtime logged with their
    cause; `declared`: stalls a declared fault put on it. The measure phase's pauses: how many, their total, the
    longest (when, how long, why), the declared ones apart."""
    measured = [(int(a), int(d)) for a, d in hiccups if window_ns[0] <= int(a) < window_ns[1]]
    faulted = [h for h in measured if _overlap(h, declared) >= h[1] / 2]
    inside = [h for h in measured if h not in faulted]
    ours = [p for p in explained if window_ns[0] <= p.start_ns + p.duration_ns and p.start_ns < window_ns[1]]
    out: dict[str, Any] = {
        "count": len(inside),
        "total_ms": round(sum(d for _, d in inside) / 1e6, 3),
        "max_ms": 0.0,
        "runtime_pauses": len(ours),
        "runtime_pause_max_ms": round(max((p.duration_ns for p in ours), default=0) / 1e6, 3),
    }
    if declared:
        out["declared"] = {"count": len(faulted), "max_ms": round(max((d for _, d in faulted), default=0) / 1e6, 3)}
    if inside:
        at, longest = max(inside, key=lambda h: h[1])
        out |= {"max_ms": round(longest / 1e6, 3), "max_at_ns": at, "max_cause": _cause(at, longest, ours)}
    return out


def _overlap(hiccup: tuple[int, int], pauses: Sequence[Pause]) -> int:
    """The longest time `hiccup` shares with one of `pauses`."""
    at, duration = hiccup
    shared = (min(at + duration, p.start_ns + p.duration_ns) - max(at, p.start_ns) for p in pauses)
    return max(shared, default=0)


def _cause(at: int, duration: int, explained: Sequence[Pause]) -> str:
    """The runtime's account of the pause that overlaps it most, or that it has none."""
    best, overlap = None, 0
    for p in explained:
        shared = min(at + duration, p.start_ns + p.duration_ns) - max(at, p.start_ns)
        if shared > overlap:
            best, overlap = p, shared
    if best is None or overlap < duration / 2:
        return UNEXPLAINED
    return best.cause or "the runtime stopped every thread"
