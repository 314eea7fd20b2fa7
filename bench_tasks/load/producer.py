"""The measured producer: its open loop (publish, with acks where the system gives them) or, for `rtt`, one
synchronous request loop per connection measured from the intended time."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..core.saturation import ProcessWatch
from ..core.schedule import NS_PER_S
from ..lake.records import write_parquet
from .driver import Driver
from .drivers import driver_for
from .pacing import open_loop, phase_plan, report_soon, until_stopped, wait_for_start
from .payload import PayloadFactory
from .plan import Channels, Clock, WorkerPlan, producer_schedule
from .receivedlog import Arrivals
from .selffacts import ready, report_harness
from .sentlog import SentLog, send_progress, until_delivered


async def produce(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    cell = plan.cell()
    w = cell.workload
    duration_ns = sum(channels.phase_ns)
    offsets, connection_of = producer_schedule(cell, plan.index, duration_ns)
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, plan.client)
    arrivals = Arrivals(now_ns)
    if cell.measurement == "rtt":  # a reply is stamped when it reaches the process, like any receipt
        driver.watch_arrivals(arrivals.mark)
    connections = await driver.open_producer(f"sixnines-p{plan.index}", w.connections)
    factory = PayloadFactory(w.message_size_bytes)
    ready(plan, channels, messages=offsets.size)
    t0 = await wait_for_start(channels)
    log = SentLog(offsets + t0, now_ns)
    watch = ProcessWatch(clock=now_ns, message_threads=driver.message_threads)
    # An rtt requester reports after a reply: nothing of its own is then on its way.
    in_flight = None if cell.measurement == "rtt" else functools.partial(until_delivered, log)
    reporter = asyncio.create_task(_report_producer(plan, channels, log, driver, watch, in_flight))
    try:
        if cell.measurement == "rtt":
            loops = (
                _request_loop(driver, nc, log, factory, np.flatnonzero(connection_of == c), arrivals, plan.index, w)
                for c, nc in enumerate(connections)
            )
            await until_stopped(channels, asyncio.gather(*loops))
        else:
            await until_stopped(channels, _publish_loop(driver, connections[0], log, factory, plan.index))
            await _await_acks(driver, log, deadline_ns=now_ns() + int(w.request_timeout_s * NS_PER_S))
    finally:  # whatever happened, what was sent is written down: nothing is lost when something fails
        reporter.cancel()
        await driver.close()
        write_parquet(
            log.table(plan.index, phase_plan(t0, channels)),
            Path(plan.staging_dir) / f"sent-p{plan.index}.parquet",
        )
    send_progress(plan, channels, log)
    report_harness(plan, channels, watch, t0, [driver])
    channels.events.put({"kind": "done", "role": "producer", "index": plan.index})


async def _publish_loop(driver: Driver, nc: Any, log: SentLog, factory: PayloadFactory, pid: int) -> None:
    """The producer's open loop: each batch built and stamped as the driver hands it to the client."""
    intended = log.intended

    async def send(start: int, end: int) -> None:
        batch = factory.batch(pid, range(start, end), intended[start:end].tolist(), log.clock)
        log.refused(await driver.send_batch(nc, log.stamped(batch), log.on_ack))
        log.fresh_sends.append((start, end))
        log.attempted = end
        log.traffic.passed()

    await open_loop(intended, send, log.clock)


async def _await_acks(driver: Driver, log: SentLog, deadline_ns: int) -> None:
    """Wait for outstanding acks; what has not arrived by the deadline counts as unacked."""
    if not driver.acks:
        return
    while log.acked_count + len(log.errors) < log.attempted and log.clock() < deadline_ns:
        await asyncio.sleep(0.01)


async def _request_loop(
    driver: Driver,
    nc: Any,
    log: SentLog,
    factory: PayloadFactory,
    seqs: np.ndarray,
    arrivals: Arrivals,
    pid: int,
    w: Any,
) -> None:
    """One synchronous rtt connection: a request cannot leave before the previous reply, but its
    latency is still measured from its intended time (wrk2's correction)."""
    now_ns = log.clock
    for seq in seqs.tolist():
        due = int(log.intended[seq])
        message = factory.prepare(pid, seq, due)
        delay = due - now_ns()
        if delay > 0:
            await asyncio.sleep(delay * 1e-9)
        sent = now_ns()
        log.sent[seq] = sent
        log.fresh_sends.append((seq, seq + 1))
        log.attempted += 1
        try:
            await driver.request(nc, factory.stamp(message, sent), w.request_timeout_s)
            log.replied(seq, arrivals.stamp(now_ns()))
        except Exception as exc:
            log.errors[seq] = type(exc).__name__
        log.traffic.passed()


async def _report_producer(
    plan: WorkerPlan,
    channels: Channels,
    log: SentLog,
    driver: Driver,
    watch: ProcessWatch,
    in_flight: Callable[[], int] | None,
) -> None:
    while True:
        await report_soon(log.traffic, in_flight)
        watch.sample(driver.backlog(), log.attempted)
        send_progress(plan, channels, log)
