"""A worker's sense of time: the open loop over a fixed schedule, the wait for t0, the stop it obeys, and when it
reports (just after a message, so reporting never delays the next one)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from ..core.saturation import SAMPLE_EVERY_S
from ..core.schedule import NS_PER_S, PhasePlan
from .plan import Channels, Clock

REPORT_EVERY_S = SAMPLE_EVERY_S  # progress reports, and the harness's samples of itself
MAX_BATCH = 1024  # messages per driver call when behind: the flusher and reporter still run between batches
WAKE_GAP_NS = 500_000  # see open_loop
IN_FLIGHT_NS = 200_000  # see Traffic
REPORT_WINDOW_S = REPORT_EVERY_S / 4  # a report waits at most this long for a message (report_soon)
DRAIN_REPORT_S = 0.05  # a listener's reports once the schedule is over (listening_pause)


class Traffic:
    """Lets a worker's reporter run just after a message rather than whenever its timer fires.

    A report (sampling /proc, building and queueing the progress event, which the queue's feeder thread then
    pickles and the parent reads) takes a few hundred microseconds of this process, of the parent and of the
    host's two cores. Run at a random moment, it delays whatever message is on its way meanwhile: at core
    NATS 1 KiB @ 1000/s most reports of the producer delayed the message sent next by 0.2-0.4 ms, and the
    consumer's the one arriving during it; about 20 of the 50 samples above e2e p99 lined up with a report.
    Just after a message the next one is furthest away (a whole interval at a fixed rate), so the work falls
    in the gap. A worker whose message has just left for another process on this host (a producer's publish,
    a responder's echo) waits `IN_FLIGHT_NS` more, or half the way to its next send if that is sooner, so its
    report does not compete with that message's delivery either (at 1000/s the message's e2e p99 is ~0.2 ms).
    At high rates messages never stop and the reporter goes at once; when none comes it goes when due anyway.
    A report is never skipped, only moved earlier by at most a quarter period (`report_soon`).

    `passed` is called for every message, in whichever thread the client delivers on: it costs one test
    unless a reporter waits, and then hands the wake-up to the event loop once."""

    def __init__(self) -> None:
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.due_s = 0.0  # when the reporter's next report is due (event-loop time; 0: not yet scheduled)

    def passed(self) -> None:
        waiter = self._waiter
        if waiter is not None and self._loop is not None:
            self._waiter = None
            self._loop.call_soon_threadsafe(_release, waiter)

    async def wait(self, timeout_s: float) -> None:
        """Return right after the next message passes, or after `timeout_s` without one."""
        self._loop = asyncio.get_running_loop()
        waiter = self._loop.create_future()
        self._waiter = waiter
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            pass
        finally:
            self._waiter = None


def _release(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def report_soon(traffic: Traffic, in_flight_ns: Callable[[], int] | None = None) -> None:
    """A reporter's pause until its next report is due (every `REPORT_EVERY_S`), taken just after the first
    message of the last `REPORT_WINDOW_S` before then (`Traffic`) and, when that message has just left for
    another process, `in_flight_ns()` more. Reports stay `REPORT_EVERY_S` apart on average and at most
    1.25 periods apart, so a one-second measure phase still holds three self-samples (`saturation`)."""
    loop = asyncio.get_running_loop()
    due = traffic.due_s = (
        max(traffic.due_s + REPORT_EVERY_S, loop.time()) if traffic.due_s else loop.time() + REPORT_EVERY_S
    )
    await asyncio.sleep(max(0.0, due - REPORT_WINDOW_S - loop.time()))
    await traffic.wait(max(0.0, due - loop.time()))
    settle_ns = in_flight_ns() if in_flight_ns is not None else 0
    if settle_ns > 0:
        await asyncio.sleep(settle_ns * 1e-9)


async def listening_pause(
    traffic: Traffic, channels: Channels, now_ns: Clock, in_flight_ns: Callable[[], int] | None = None
) -> None:
    """A listener's pause before its next report: `report_soon` while the schedule runs, `DRAIN_REPORT_S` once
    it is over (t0 plus every phase). The parent's drain ends when the reports count every sent message, and a
    listener ends at the first look at `stop` after it: at a report period each, that was 0.3-0.45 s of every
    cell's wall after its cooldown. What still arrives then was sent a cooldown or more before, so the few tens
    of microseconds of a report no longer matter beside its latency. The pause that spans the schedule's end ends
    `DRAIN_REPORT_S` after it: waiting out its period cost up to 0.25 s of the drain (a NATS cell, 0.24 s)."""
    t0 = int(channels.start_at_ns.value)
    end_ns = t0 + sum(channels.phase_ns)
    if t0 and now_ns() >= end_ns:
        await asyncio.sleep(DRAIN_REPORT_S)
        return
    until_end_s = (end_ns - now_ns()) / NS_PER_S + DRAIN_REPORT_S if t0 else None
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(report_soon(traffic, in_flight_ns), until_end_s)


def fixed_in_flight() -> int:
    return IN_FLIGHT_NS


async def wait_for_start(channels: Channels) -> int:
    while channels.start_at_ns.value == 0:
        if channels.stop.is_set():
            raise RuntimeError("stopped before start")
        await asyncio.sleep(0.005)
    return int(channels.start_at_ns.value)


def phase_plan(t0: int, channels: Channels) -> PhasePlan:
    return PhasePlan(t0, *channels.phase_ns)


async def until_stopped(channels: Channels, work: Awaitable[Any], poll_s: float = 0.05) -> None:
    """Run `work` until it ends or the parent sets `stop` (a cell cut off because its schedule could not end in
    time): then it is cancelled, and the caller's `finally` still writes down everything sent so far, instead of
    the process being terminated with its samples unwritten. It looks at `stop` every `poll_s` rather than
    waiting on it in a thread: a process that exits while one of its threads sleeps in a multiprocessing Event's
    wait leaves the Event's condition counting a sleeper that never wakes, and the parent's `stop.set()` then
    fails (`notify: Should not have been able to acquire _wait_semaphore`)."""
    task = asyncio.ensure_future(work)
    while not task.done():
        if channels.stop.is_set():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            return
        await asyncio.wait({task}, timeout=poll_s)
    task.result()


async def open_loop(intended: np.ndarray, send: Callable[[int, int], Awaitable[None]], now_ns: Clock) -> None:
    """The open loop over a sorted schedule: sleep until the next message is due (never past it), then send
    every message due by now in one batch, `send(start, end)`. Behind schedule, batches follow each other
    at once, yielding in between so the client's flusher and the reporter run; nothing waits for the system.

    A wake-up costs tens of microseconds whatever it sends, so at rates whose messages are closer together
    than `WAKE_GAP_NS` the loop wakes at most once per gap and sends everything due by then: a message may
    leave up to that much after its intended time (recorded as send lag, part of response time like any
    other harness delay; service time is untouched). Slower schedules wake for every message exactly."""
    n, start, woke = intended.size, 0, 0
    while start < n:
        now = now_ns()
        wake = max(int(intended[start]), woke + WAKE_GAP_NS)
        await asyncio.sleep((wake - now) * 1e-9 if wake > now else 0)
        woke = now_ns()
        due = int(np.searchsorted(intended, woke, side="right"))
        end = min(max(due, start + 1), start + MAX_BATCH, n)
        await send(start, end)
        start = end
