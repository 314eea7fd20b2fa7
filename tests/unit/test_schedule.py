"""bench_tasks.core.schedule: open-loop intended send times and phase assignment."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from bench_tasks.core.schedule import NS_PER_S, PHASE_NAMES, Phase, PhasePlan, stream_offsets_ns
from bench_tasks.spec.cell import Workload

MS = 1_000_000


def _all_streams(rate: float, streams: int, duration_ns: int, arrival: str, seed: int = 0) -> list[np.ndarray]:
    return [stream_offsets_ns(rate, streams, k, duration_ns, arrival, seed) for k in range(streams)]


# --- uniform -------------------------------------------------------------------------------------------


def test_uniform_single_stream_exact_times() -> None:
    times = stream_offsets_ns(1000, 1, 0, 5 * MS, "uniform", 0)
    assert times.dtype == np.int64
    assert times.tolist() == [0, 1 * MS, 2 * MS, 3 * MS, 4 * MS]


def test_uniform_two_streams_interleave() -> None:
    first, second = _all_streams(1000, 2, 5 * MS, "uniform")
    assert first.tolist() == [0, 2 * MS, 4 * MS]
    assert second.tolist() == [1 * MS, 3 * MS]  # offset by 1/R
    merged = np.sort(np.concatenate([first, second]))
    assert merged.tolist() == [0, 1 * MS, 2 * MS, 3 * MS, 4 * MS]


def test_uniform_non_integral_period_rounds_to_nearest_ns() -> None:
    assert stream_offsets_ns(3, 1, 0, NS_PER_S, "uniform", 0).tolist() == [0, 333_333_333, 666_666_667]
    streams = _all_streams(7, 3, NS_PER_S, "uniform")
    assert [s.tolist() for s in streams] == [
        [0, 428_571_429, 857_142_857],
        [142_857_143, 571_428_571],
        [285_714_286, 714_285_714],
    ]


@pytest.mark.parametrize(
    ("rate", "streams", "duration_s"),
    [(1000, 1, 1), (1000, 2, 1), (1000, 3, 2), (7, 3, 1), (250, 4, 3), (100_000, 16, 1), (12_345, 5, 2)],
)
def test_uniform_streams_together_give_rate_times_duration(rate: int, streams: int, duration_s: int) -> None:
    duration_ns = duration_s * NS_PER_S
    parts = _all_streams(rate, streams, duration_ns, "uniform")
    merged = np.sort(np.concatenate(parts))
    assert merged.size == rate * duration_s
    assert merged[0] == 0
    assert merged[-1] < duration_ns
    # merged schedule is a single even grid: gaps all within 1 ns of 1/R
    gaps = np.diff(merged)
    assert np.all(np.abs(gaps - NS_PER_S / rate) <= 1)
    # per-stream sizes differ by at most one
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_duration_is_exclusive() -> None:
    # 4 ms exactly would be the 5th message: it belongs to the next window
    assert stream_offsets_ns(1000, 1, 0, 4 * MS, "uniform", 0).tolist() == [0, MS, 2 * MS, 3 * MS]
    assert stream_offsets_ns(1000, 1, 0, 4 * MS + 1, "uniform", 0).tolist() == [0, MS, 2 * MS, 3 * MS, 4 * MS]


def test_uniform_stream_starting_after_duration_is_empty() -> None:
    # stream 1 of 2 at 1/s starts at 1 s, which is outside a 1 s window
    assert stream_offsets_ns(1, 2, 1, NS_PER_S, "uniform", 0).size == 0
    assert stream_offsets_ns(1000, 1, 0, 0, "uniform", 0).size == 0


@pytest.mark.parametrize("arrival", ["uniform", "poisson"])
@pytest.mark.parametrize(("rate", "streams"), [(1000, 1), (333.3, 3), (50_000, 8)])
def test_all_times_inside_window_and_increasing(arrival: str, rate: float, streams: int) -> None:
    duration_ns = 2 * NS_PER_S + 123
    for times in _all_streams(rate, streams, duration_ns, arrival, seed=5):
        assert times.size > 0
        assert times.min() >= 0
        assert times.max() < duration_ns
        # non-decreasing; two Poisson arrivals may round to the same nanosecond
        assert np.all(np.diff(times) >= (1 if arrival == "uniform" else 0))


# --- poisson -------------------------------------------------------------------------------------------


def test_poisson_reproducible_for_same_seed() -> None:
    a = stream_offsets_ns(2000, 2, 1, NS_PER_S, "poisson", 42)
    b = stream_offsets_ns(2000, 2, 1, NS_PER_S, "poisson", 42)
    np.testing.assert_array_equal(a, b)


def test_poisson_differs_between_seeds_and_streams() -> None:
    a = stream_offsets_ns(2000, 2, 0, NS_PER_S, "poisson", 1)
    b = stream_offsets_ns(2000, 2, 0, NS_PER_S, "poisson", 2)
    c = stream_offsets_ns(2000, 2, 1, NS_PER_S, "poisson", 1)
    assert a.size > 100
    assert not np.array_equal(a[:100], b[:100])
    assert not np.array_equal(a[:100], c[:100])


def test_poisson_mean_rate_over_long_duration() -> None:
    rate, streams, duration_s = 1000.0, 4, 200
    total = sum(p.size for p in _all_streams(rate, streams, duration_s * NS_PER_S, "poisson", seed=3))
    expected = rate * duration_s  # 200k: the Poisson sd is ~450, i.e. 0.2 %
    assert abs(total - expected) / expected < 0.02


def test_poisson_gaps_are_exponential() -> None:
    rate, duration_ns = 5000.0, 40 * NS_PER_S
    times = stream_offsets_ns(rate, 1, 0, duration_ns, "poisson", 11)
    gaps = np.diff(times).astype(np.float64)
    mean = gaps.mean()
    assert mean == pytest.approx(NS_PER_S / rate, rel=0.02)
    assert gaps.std() / mean == pytest.approx(1.0, abs=0.03)  # coefficient of variation of an exponential
    # memorylessness check: P(gap > mean) = e^-1
    assert np.mean(gaps > mean) == pytest.approx(np.exp(-1), abs=0.01)


def test_poisson_stream_gap_mean_is_streams_over_rate() -> None:
    times = stream_offsets_ns(4000, 4, 2, 20 * NS_PER_S, "poisson", 9)
    assert np.diff(times).mean() == pytest.approx(4 * NS_PER_S / 4000, rel=0.03)


def test_poisson_covers_the_whole_duration() -> None:
    duration_ns = 10 * NS_PER_S
    times = stream_offsets_ns(100, 1, 0, duration_ns, "poisson", 0)
    # the last arrival is within a few mean gaps of the end (the generator did not stop early)
    assert duration_ns - times[-1] < 10 * NS_PER_S / 100


def test_matrix_refuses_seeds_poisson_cannot_use() -> None:
    """Every seed the matrix accepts must work in the schedule, so negative seeds are refused up front."""
    with pytest.raises(ValidationError, match="seed"):
        Workload(message_size_bytes=64, rate_per_s=100, measure_s=1, arrival="poisson", seed=-1)
    workload = Workload(message_size_bytes=64, rate_per_s=100, measure_s=1, arrival="poisson", seed=0)
    times = stream_offsets_ns(workload.rate_per_s, 1, 0, NS_PER_S, workload.arrival, workload.seed)
    assert times.size > 0


# --- invalid arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rate", "streams", "index"),
    [(0, 1, 0), (-5, 1, 0), (100, 0, 0), (100, 2, 2), (100, 2, -1), (100, 1, 1)],
)
def test_invalid_arguments_raise(rate: float, streams: int, index: int) -> None:
    with pytest.raises(ValueError):
        stream_offsets_ns(rate, streams, index, NS_PER_S, "uniform", 0)


def test_unknown_arrival_raises() -> None:
    with pytest.raises(ValueError, match="unknown arrival process 'bursty'"):
        stream_offsets_ns(100, 1, 0, NS_PER_S, "bursty", 0)


# --- phases --------------------------------------------------------------------------------------------


def test_phase_plan_properties_add_up() -> None:
    plan = PhasePlan(t0_ns=1_000, warmup_ns=200, measure_ns=500, cooldown_ns=100)
    assert plan.measure_start_ns == 1_200
    assert plan.measure_end_ns == 1_700
    assert plan.end_ns == 1_800
    assert plan.duration_ns == 800
    assert plan.end_ns - plan.t0_ns == plan.duration_ns
    assert plan.to_dict() == {
        "t0_ns": 1_000,
        "measure_start_ns": 1_200,
        "measure_end_ns": 1_700,
        "end_ns": 1_800,
    }


def test_phases_of_boundaries() -> None:
    plan = PhasePlan(t0_ns=1_000, warmup_ns=200, measure_ns=500, cooldown_ns=100)
    intended = np.array([1_000, 1_199, 1_200, 1_201, 1_699, 1_700, 1_799], dtype=np.int64)
    phases = plan.phases_of(intended)
    assert phases.tolist() == [
        Phase.WARMUP,
        Phase.WARMUP,
        Phase.MEASURE,  # measure_start is measure
        Phase.MEASURE,
        Phase.MEASURE,
        Phase.COOLDOWN,  # measure_end is cooldown
        Phase.COOLDOWN,
    ]
    assert [PHASE_NAMES[p] for p in phases] == [
        "warmup",
        "warmup",
        "measure",
        "measure",
        "measure",
        "cooldown",
        "cooldown",
    ]


def test_phases_of_without_warmup() -> None:
    plan = PhasePlan(t0_ns=0, warmup_ns=0, measure_ns=10, cooldown_ns=0)
    assert plan.phases_of(np.array([0, 9, 10])).tolist() == [1, 1, 2]


def test_phases_of_full_uniform_schedule() -> None:
    plan = PhasePlan(t0_ns=5 * NS_PER_S, warmup_ns=2 * NS_PER_S, measure_ns=3 * NS_PER_S, cooldown_ns=NS_PER_S)
    offsets = stream_offsets_ns(100, 1, 0, plan.duration_ns, "uniform", 0)
    counts = np.bincount(plan.phases_of(plan.t0_ns + offsets), minlength=3)
    assert counts.tolist() == [200, 300, 100]


def test_phase_names_order() -> None:
    assert PHASE_NAMES == ("warmup", "measure", "cooldown")
