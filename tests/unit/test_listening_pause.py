"""A listener's pause between reports (`pacing.listening_pause`): placed beside messages by `report_soon`
while the schedule runs (its latencies are measured), a short fixed pause once the schedule is over, so the
cell's drain and stop are not held up by a report period."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time

import pytest

from bench_tasks.load import pacing
from bench_tasks.load.pacing import DRAIN_REPORT_S, Traffic, listening_pause
from bench_tasks.load.plan import Channels

PHASES_NS = (1_000_000_000, 2_000_000_000, 500_000_000)


def _channels(t0_ns: int) -> Channels:
    ctx = mp.get_context("spawn")
    return Channels(events=ctx.Queue(), start_at_ns=ctx.Value("q", t0_ns), stop=ctx.Event(), phase_ns=PHASES_NS)


def _paused_by(monkeypatch: pytest.MonkeyPatch, t0_ns: int, now_ns: int) -> tuple[list[str], float]:
    """Which pause `listening_pause` took at `now_ns` of a schedule starting at `t0_ns` (0: not fixed yet)."""
    taken: list[str] = []

    async def report_soon(traffic: Traffic, in_flight_ns: object = None) -> None:
        taken.append("report_soon")

    monkeypatch.setattr(pacing, "report_soon", report_soon)
    started = time.monotonic()
    asyncio.run(listening_pause(Traffic(), _channels(t0_ns), lambda: now_ns))
    return taken, time.monotonic() - started


@pytest.mark.parametrize(("t0_ns", "now_ns"), [(0, 5), (10, 10), (10, 10 + sum(PHASES_NS) - 1)])
def test_before_and_during_the_schedule_reports_keep_their_placement(
    monkeypatch: pytest.MonkeyPatch, t0_ns: int, now_ns: int
) -> None:
    taken, _ = _paused_by(monkeypatch, t0_ns, now_ns)
    assert taken == ["report_soon"]


def test_after_the_schedule_a_listener_pauses_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    taken, paused_s = _paused_by(monkeypatch, 10, 10 + sum(PHASES_NS))
    assert taken == [] and paused_s >= DRAIN_REPORT_S * 0.9


def test_a_pause_spanning_the_schedule_s_end_ends_just_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report due after the end is not waited for: the drain counts what arrived as soon as the schedule ends."""

    async def report_soon(traffic: Traffic, in_flight_ns: object = None) -> None:
        await asyncio.sleep(5)

    monkeypatch.setattr(pacing, "report_soon", report_soon)
    end_ns = 10 + sum(PHASES_NS)
    started = time.monotonic()
    asyncio.run(listening_pause(Traffic(), _channels(10), lambda: end_ns - 100_000_000))  # 0.1 s before the end
    assert 0.1 + DRAIN_REPORT_S * 0.9 <= time.monotonic() - started < 1.0
