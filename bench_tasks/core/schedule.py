"""The open-loop schedule: when each message is *intended* to be sent, and which phase it belongs to.

One schedule spans warmup, measure and cooldown without a gap; a message's phase is decided by its
intended time, never by when something happened to run. The rate of a workload is split evenly over
its streams (producers × connections); stream k of S at total rate R is offset by k/R so the streams
interleave instead of firing in bursts.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np

NS_PER_S = 1_000_000_000


class Phase(IntEnum):
    """Stored as its name in Parquet; the integer only orders the phases."""

    WARMUP = 0
    MEASURE = 1
    COOLDOWN = 2


PHASE_NAMES = tuple(p.name.lower() for p in Phase)


@dataclass(frozen=True)
class PhasePlan:
    """Phase boundaries on the shared monotonic clock (ns). `t0_ns` is the first intended send time."""

    t0_ns: int
    warmup_ns: int
    measure_ns: int
    cooldown_ns: int

    @property
    def measure_start_ns(self) -> int:
        return self.t0_ns + self.warmup_ns

    @property
    def measure_end_ns(self) -> int:
        return self.measure_start_ns + self.measure_ns

    @property
    def end_ns(self) -> int:
        return self.measure_end_ns + self.cooldown_ns

    @property
    def duration_ns(self) -> int:
        return self.warmup_ns + self.measure_ns + self.cooldown_ns

    def phases_of(self, intended_ns: np.ndarray) -> np.ndarray:
        """Phase code (0 warmup, 1 measure, 2 cooldown) of each intended time."""
        edges = np.array([self.measure_start_ns, self.measure_end_ns], dtype=np.int64)
        return np.searchsorted(edges, np.asarray(intended_ns, dtype=np.int64), side="right").astype(np.int8)

    def to_dict(self) -> dict[str, int]:
        return {
            "t0_ns": self.t0_ns,
            "measure_start_ns": self.measure_start_ns,
            "measure_end_ns": self.measure_end_ns,
            "end_ns": self.end_ns,
        }


def stream_offsets_ns(
    rate_per_s: float,
    streams: int,
    stream_index: int,
    duration_ns: int,
    arrival: str,
    seed: int,
) -> np.ndarray:
    """Intended send times of one stream, in ns relative to t0, all inside [0, duration_ns).

    uniform: stream k sends at (k + i*S)/R. poisson: exponential gaps with mean S/R (the same mean
    rate), seeded by (seed, stream_index) so a cell's schedule is reproducible.
    """
    if rate_per_s <= 0 or streams < 1 or not 0 <= stream_index < streams:
        raise ValueError("rate must be > 0 and 0 <= stream_index < streams")
    period_ns = streams * NS_PER_S / rate_per_s
    first_ns = stream_index * NS_PER_S / rate_per_s
    if arrival == "uniform":
        count = max(0, int(np.ceil((duration_ns - first_ns) / period_ns)))
        times = np.round(first_ns + np.arange(count, dtype=np.float64) * period_ns).astype(np.int64)
    elif arrival == "poisson":
        rng = np.random.default_rng([seed, stream_index])
        expected = duration_ns / period_ns
        chunk = int(expected + 6 * np.sqrt(expected) + 16)
        gaps = rng.exponential(period_ns, size=chunk)
        times_f = np.cumsum(gaps)
        while times_f[-1] < duration_ns:  # rare: extend until the stream covers the whole duration
            more = times_f[-1] + np.cumsum(rng.exponential(period_ns, size=chunk))
            times_f = np.concatenate([times_f, more])
        times = np.round(times_f).astype(np.int64)
    else:
        raise ValueError(f"unknown arrival process {arrival!r}")
    return times[times < duration_ns]
