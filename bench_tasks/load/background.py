"""Background traffic (seed 004): some of a background workload's logical producers on one loop and one client,
open loop like the measured producers, counted and never timed."""

from __future__ import annotations

import asyncio

import numpy as np

from ..core.schedule import NS_PER_S
from .driver import Outgoing
from .drivers import background_spec, driver_for
from .pacing import REPORT_EVERY_S, open_loop, wait_for_start
from .payload import PayloadFactory
from .plan import Channels, Clock, WorkerPlan, background_schedule
from .routes import background_route
from .selffacts import ready


async def produce_background(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """Some of a background workload's logical producers, multiplexed on one loop and one client: each
    keeps its own fixed-rate schedule (interleaved with the others, as independent producers would be) and,
    with per-producer keys, its own key. Open loop like the measured producers; counted, never timed."""
    cell = plan.cell()
    bg = cell.background[plan.background]
    route = background_route(plan.background)
    driver = driver_for(plan.url, background_spec(cell, bg), plan.names or plan.cell_id, route, client=plan.client)
    offsets, stream_of = background_schedule(cell, plan, sum(channels.phase_ns))
    (conn,) = await driver.open_producer(f"sixnines-bg-{plan.background}-{plan.part}", 1)
    factory = PayloadFactory(bg.message_size_bytes)
    counts = {"scheduled": int(offsets.size), "sent": 0, "acked": 0, "errors": 0}
    lag = np.full(offsets.size, -1, dtype=np.int64)

    def on_ack(_seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        counts["acked" if error is None else "errors"] += 1

    def progress(kind: str = "progress") -> None:
        event = {"kind": kind, "role": "background", "index": plan.index, "background": plan.background, **counts}
        if kind == "done":
            event["lag_ns"] = lag[lag >= 0]
        channels.events.put(event)

    ready(plan, channels, messages=offsets.size)
    t0 = await wait_for_start(channels)
    intended = offsets + t0
    next_report = [now_ns() + int(REPORT_EVERY_S * NS_PER_S)]

    def stamped(start: int, end: int) -> Outgoing:
        """Each stream's messages carry its own id in the header and key; lag recorded as each one leaves."""
        for n in range(start, end):
            stream = int(stream_of[n])
            (_, sent, message) = next(factory.batch(stream, (n,), (int(intended[n]),), now_ns))
            lag[n] = sent - int(intended[n])
            yield n, stream, message

    async def send(start: int, end: int) -> None:
        refused = await driver.send_batch(conn, stamped(start, end), on_ack)
        lag[list(refused)] = -1
        counts["sent"] += end - start - len(refused)
        counts["errors"] += len(refused)
        if now_ns() >= next_report[0]:
            progress()
            next_report[0] = now_ns() + int(REPORT_EVERY_S * NS_PER_S)

    try:
        await open_loop(intended, send, now_ns)
        deadline = now_ns() + int(cell.workload.request_timeout_s * NS_PER_S)
        while driver.acks and counts["acked"] + counts["errors"] < counts["scheduled"] and now_ns() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await driver.close()
    progress("done")
