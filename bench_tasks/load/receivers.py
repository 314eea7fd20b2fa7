"""The workers that receive: the measured consumer (every receipt timed), the unmeasured consumers (a lagging
one, a background one: counted, never timed) and the rtt responder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ..core.saturation import ProcessWatch
from .driver import Received
from .drivers import background_spec, driver_for
from .pacing import REPORT_EVERY_S, Traffic, fixed_in_flight, listening_pause, phase_plan
from .plan import Channels, Clock, WorkerPlan, expected_receipts
from .receivedlog import ReceivedLog, consumer_progress
from .routes import MEASURED, background_route
from .selffacts import ready, report_harness


async def consume(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, client=plan.client)
    log = ReceivedLog(now_ns, expected=expected_receipts(cell, sum(channels.phase_ns)))
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    driver.watch_arrivals(log.arrivals.mark)
    await driver.open_consumer(f"sixnines-c{plan.index}", log.on_messages)
    ready(plan, channels)
    while not channels.stop.is_set():
        await listening_pause(log.traffic, channels, now_ns)
        watch.sample(driver.backlog(), log.handed)
        consumer_progress(plan, channels, log)
    await driver.close()
    log.flush()  # the client is closed: nothing else writes now
    t0 = int(channels.start_at_ns.value)
    log.write(plan.index, phase_plan(t0, channels), Path(plan.staging_dir) / f"received-c{plan.index}.parquet")
    consumer_progress(plan, channels, log)
    warmup, measure, _ = channels.phase_ns
    waits = log.waits_us((t0 + warmup, t0 + warmup + measure))
    report_harness(plan, channels, watch, t0, [driver], {"receive_wait_us": waits})
    channels.events.put({"kind": "done", "role": "consumer", "index": plan.index})


async def count_consumer(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """An unmeasured consumer, counted but never timed: a lagging one reads the measured topic's backlog
    from its oldest message (seed 003); a background one reads its background workload (seed 004)."""
    cell = plan.cell()
    if plan.role == "bg_consumer":
        spec, route = background_spec(cell, cell.background[plan.background]), background_route(plan.background)
    else:
        spec, route = cell, MEASURED
    driver = driver_for(plan.url, spec, plan.names or plan.cell_id, route, client=plan.client)
    consumed = [0]
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)

    def count(batch: Received) -> None:
        consumed[0] += len(batch.payloads())

    name = f"sixnines-{'l' if plan.role == 'laggard' else 'bgc'}{plan.index}"
    group = {"subscription": plan.subscription} if plan.subscription else {}  # asked only of drivers that take it
    await driver.open_consumer(name, count, lagging=plan.role == "laggard", **group)
    ready(plan, channels)

    def progress() -> None:
        channels.events.put(
            {
                "kind": "progress",
                "role": plan.role,
                "index": plan.index,
                "background": plan.background,
                "subscription": plan.subscription,
                "consumed": consumed[0],
            }
        )

    while not channels.stop.is_set():
        await asyncio.sleep(REPORT_EVERY_S)
        watch.sample(driver.backlog(), consumed[0])
        progress()
    await driver.close()
    progress()
    report_harness(plan, channels, watch, int(channels.start_at_ns.value), [driver])
    channels.events.put({"kind": "done", "role": plan.role, "index": plan.index})


async def respond(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, client=plan.client)
    served = [0]
    traffic = Traffic()

    def count() -> None:
        served[0] += 1
        traffic.passed()

    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    await driver.open_responder(f"sixnines-r{plan.index}", count)
    ready(plan, channels)
    while not channels.stop.is_set():
        await listening_pause(traffic, channels, now_ns, fixed_in_flight)  # its echo has just left
        watch.sample(driver.backlog(), served[0])
        channels.events.put({"kind": "progress", "role": "responder", "index": plan.index, "served": served[0]})
    await driver.close()
    report_harness(plan, channels, watch, int(channels.start_at_ns.value), [driver])
    channels.events.put({"kind": "done", "role": "responder", "index": plan.index})
