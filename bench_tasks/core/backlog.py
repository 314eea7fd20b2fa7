"""A cell's backlog over its measure phase: how many messages had been sent and had not yet arrived.

Arrived means what the cell measures arriving: the final consumer's first receipt (e2e, chain), or the broker's
acknowledgement or reply (publish, rtt). The backlog is counted from actual send times, not intended ones, so a
generator running late does not add to it (the schedule-lag gate judges that); a message that never arrives stays
in it to the end. It changes at every send and every arrival, so its distribution is weighted by time:
`percentiles["99"]` is the level the backlog was at or below for 99 % of the measure phase, `max_messages` the
highest level it held for any time at all. OpenMessaging Benchmark's max-rate search holds its rate to this count
(published and not yet received) staying under a limit; `capacity` objectives can too (`backlog p99 < 1000 msgs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .percentile_keys import PERCENTILES


@dataclass(frozen=True)
class BacklogSummary:
    """The measure phase's backlog, in messages, weighted by time (see the module docstring)."""

    max_messages: int
    percentiles: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"max_messages": self.max_messages, "percentiles_messages": dict(self.percentiles)}

    @classmethod
    def from_dict(cls, d: dict) -> BacklogSummary:
        return cls(int(d["max_messages"]), {p: int(v) for p, v in d["percentiles_messages"].items()})


def backlog_levels(
    sent_ns: np.ndarray, arrived_ns: np.ndarray, window: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """(level, duration in ns) of every stretch of the window over which the backlog did not change: the backlog
    carried in at the window's start, then one stretch after each send or arrival inside it."""
    start, end = window
    carried = int(np.count_nonzero(sent_ns < start)) - int(np.count_nonzero(arrived_ns < start))
    sends = sent_ns[(sent_ns >= start) & (sent_ns < end)]
    arrivals = arrived_ns[(arrived_ns >= start) & (arrived_ns < end)]
    times = np.concatenate([sends, arrivals])
    steps = np.concatenate([np.ones(sends.size, np.int64), -np.ones(arrivals.size, np.int64)])
    order = np.argsort(times, kind="stable")
    levels = np.concatenate([[carried], carried + np.cumsum(steps[order])])
    durations = np.diff(np.concatenate([[start], times[order], [end]]))
    return levels, durations


def summarize_backlog(sent_ns: np.ndarray, arrived_ns: np.ndarray, window: tuple[int, int]) -> BacklogSummary | None:
    """The backlog of the window from every actual send time and every arrival time (any phase); None for an
    empty window."""
    if window[1] <= window[0]:
        return None
    levels, durations = backlog_levels(np.asarray(sent_ns), np.asarray(arrived_ns), window)
    held = durations > 0  # several events at one instant: only the level after the last of them is ever held
    levels, durations = np.maximum(levels[held], 0), durations[held]
    order = np.argsort(levels, kind="stable")
    ranked, elapsed = levels[order], np.cumsum(durations[order])
    total = int(elapsed[-1])
    percentiles = {p: int(ranked[np.searchsorted(elapsed, float(p) / 100 * total, side="left")]) for p in PERCENTILES}
    return BacklogSummary(int(ranked[-1]), percentiles)
