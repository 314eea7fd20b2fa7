"""The open-loop load generator's worker processes: producers, consumers, rtt responders, service-chain
relays, background-traffic producers and unmeasured (lagging or background) consumers.

Each worker is its own OS process (the GIL must not couple producers) running one precise asyncio loop.
A producer follows its fixed schedule and never waits for the system before the next send: when it is
behind, it sends at once and the message keeps its *intended* time, so latency measured from intended
time is response time, free of coordinated omission. Every timestamp is `now_ns()` taken here, never in the
driver: `time.monotonic_ns()`, or on a cell split over real hosts the host clock (`clock.host_clock`).
Workers stream progress (counts and fresh latencies) to the parent every 250 ms and write their own Parquet
file at the end.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing.synchronize
import os
import time
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from setproctitle import setproctitle

from .core.schedule import NS_PER_S, PHASE_NAMES, PhasePlan, stream_offsets_ns
from .drivers import HOP2, MEASURED, background_route, background_spec, driver_for
from .drivers.base import Driver
from .errors import PayloadError
from .lake.records import RECEIVED_SCHEMA, SENT_SCHEMA, write_parquet
from .loop import run_precise, tighten_timer_slack
from .payload import PayloadFactory, decode_header, decode_relay_stamp, relay, stamp_relay_sent
from .spec.matrix import CELL_ADAPTER, CellSpec

REPORT_EVERY_S = 0.25
_YIELD_EVERY = 32  # when behind schedule, still let the client's flusher run this often
now_ns = time.monotonic_ns


@dataclass(frozen=True)
class WorkerPlan:
    """What a worker needs; pickled to the child process."""

    role: str  # producer | consumer | responder | relay | laggard | background | bg_consumer
    index: int  # unique per role within the cell
    url: str  # broker address: NATS URL or Kafka bootstrap servers
    cell_id: str
    cell_json: str
    staging_dir: str
    cpus: tuple[int, ...] = ()
    route: str = MEASURED  # which topic/subject a consumer reads (a chain's final consumers read HOP2)
    client: dict[str, Any] = field(default_factory=dict)  # security settings (may be secret: never written down)
    names: str = ""  # the token routes are named from ("": the cell id)
    background: str = ""  # background/bg_consumer: the background workload's name
    part: int = 0  # background: which of the workload's processes this is
    netns: str = ""  # the network namespace of the worker's host ('' = where the parent runs)
    clock_shift_ns: int = 0  # a cell split over real hosts: stamps on the host clock (monotonic + this shift)

    def cell(self) -> CellSpec:
        return CELL_ADAPTER.validate_json(self.cell_json)


@dataclass
class Channels:
    """Process-shared channels between the parent and its workers."""

    events: Queue
    start_at_ns: Synchronized  # 0 until the parent fixes t0 for every producer
    stop: multiprocessing.synchronize.Event
    phase_ns: tuple[int, int, int]  # warmup, measure, cooldown durations


def worker_main(plan: WorkerPlan, channels: Channels) -> None:
    """Process entry point."""
    setproctitle(f"sixnines {plan.role}-{plan.index} cell {plan.cell_id}")  # readable in ps/top
    if plan.netns:  # first, before any socket exists: everything this worker opens belongs to its host
        from .topology.netns import enter

        enter(plan.netns)
    if plan.cpus:
        os.sched_setaffinity(0, plan.cpus)
    if plan.clock_shift_ns:  # rebinds the module's clock for every stamp this process takes
        from .topology.clock import host_clock

        global now_ns
        now_ns = host_clock(plan.clock_shift_ns)
    tighten_timer_slack()
    _warm_arrow()
    role = {
        "producer": _produce,
        "consumer": _consume,
        "responder": _respond,
        "relay": _relay,
        "laggard": _count_consumer,
        "background": _background,
        "bg_consumer": _count_consumer,
    }[plan.role]
    try:
        run_precise(role(plan, channels))
    except Exception as exc:  # reported, then the non-zero exit tells the parent too
        channels.events.put({"kind": "failed", "role": plan.role, "index": plan.index, "error": repr(exc)})
        raise


def _warm_arrow() -> None:
    """pyarrow's first conversion of Python objects imports pandas (seconds on a loaded host): pay it during
    setup, before the worker reports ready, not after the schedule when every worker writes its samples."""
    pa.array([None, "warm"], pa.string())


def producer_schedule(cell: CellSpec, index: int, duration_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Intended offsets (ns from t0, sorted) of one producer's messages, and the connection of each."""
    w = cell.workload
    streams = w.producers * w.connections
    parts = [
        stream_offsets_ns(w.rate_per_s, streams, index * w.connections + c, duration_ns, w.arrival, w.seed)
        for c in range(w.connections)
    ]
    offsets = np.concatenate(parts)
    connection = np.concatenate([np.full(p.size, c, dtype=np.int32) for c, p in enumerate(parts)])
    order = np.argsort(offsets, kind="stable")
    return offsets[order], connection[order]


class _SentLog:
    """Preallocated per-message arrays of one producer: the hot path only assigns into them."""

    def __init__(self, intended: np.ndarray):
        n = intended.size
        self.intended = intended
        self.sent = np.full(n, -1, dtype=np.int64)
        self.acked = np.full(n, -1, dtype=np.int64)
        self.partition = np.full(n, -1, dtype=np.int32)
        self.offset = np.full(n, -1, dtype=np.int64)
        self.errors: dict[int, str] = {}
        self.attempted = 0
        self.fresh_sends: list[int] = []  # seqs sent since the last report
        self.fresh_acks: list[int] = []  # seqs acked since the last report
        self.acked_count = 0

    def on_ack(self, seq: int, partition: int | None, offset: int | None, error: str | None) -> None:
        if error is None:
            self.acked[seq] = now_ns()
            self.partition[seq] = -1 if partition is None else partition
            self.offset[seq] = -1 if offset is None else offset
            self.acked_count += 1
            self.fresh_acks.append(seq)
        else:
            self.errors[seq] = error

    def table(self, producer_id: int, plan: PhasePlan) -> pa.Table:
        n = self.intended.size
        error = [None] * n
        for seq, text in self.errors.items():
            error[seq] = text
        phases = np.array(PHASE_NAMES, dtype=object)[plan.phases_of(self.intended)]
        return pa.table(
            {
                "producer_id": pa.array(np.full(n, producer_id, dtype=np.int32)),
                "seq": pa.array(np.arange(n, dtype=np.int64)),
                "intended_ns": pa.array(self.intended),
                "sent_ns": pa.array(self.sent, mask=self.sent < 0),
                "acked_ns": pa.array(self.acked, mask=self.acked < 0),
                "partition": pa.array(self.partition, mask=self.partition < 0),
                "offset": pa.array(self.offset, mask=self.offset < 0),
                "phase": pa.array(phases, pa.string()),
                "error": pa.array(error, pa.string()),
            },
            schema=SENT_SCHEMA,
        )


def _freeze_setup_heap() -> None:
    """Everything allocated during setup lives for the whole cell: move it out of the collector's sight so
    a full collection during the schedule scans only what the schedule itself allocates."""
    gc.collect()
    gc.freeze()


async def _wait_for_start(channels: Channels) -> int:
    _freeze_setup_heap()
    while channels.start_at_ns.value == 0:
        if channels.stop.is_set():
            raise RuntimeError("stopped before start")
        await asyncio.sleep(0.005)
    return int(channels.start_at_ns.value)


def _phase_plan(t0: int, channels: Channels) -> PhasePlan:
    return PhasePlan(t0, *channels.phase_ns)


async def _produce(plan: WorkerPlan, channels: Channels) -> None:
    cell = plan.cell()
    w = cell.workload
    duration_ns = sum(channels.phase_ns)
    offsets, connection_of = producer_schedule(cell, plan.index, duration_ns)
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, plan.client)
    connections = await driver.open_producer(f"sixnines-p{plan.index}", w.connections)
    factory = PayloadFactory(w.message_size_bytes)
    channels.events.put({"kind": "ready", "role": "producer", "index": plan.index, "messages": offsets.size})
    t0 = await _wait_for_start(channels)
    log = _SentLog(offsets + t0)
    reporter = asyncio.create_task(_report_producer(plan, channels, log))
    try:
        if cell.measurement == "rtt":
            await asyncio.gather(
                *(
                    _request_loop(driver, nc, log, factory, plan.index, np.flatnonzero(connection_of == c), w)
                    for c, nc in enumerate(connections)
                )
            )
        else:
            await _publish_loop(driver, connections[0], log, factory, plan.index)
            await _await_acks(driver, log, deadline_ns=now_ns() + int(w.request_timeout_s * NS_PER_S))
    finally:  # whatever happened, what was sent is written down: nothing is lost when something fails
        reporter.cancel()
        await driver.close()
        write_parquet(
            log.table(plan.index, _phase_plan(t0, channels)),
            Path(plan.staging_dir) / f"sent-p{plan.index}.parquet",
        )
    _send_progress(plan, channels, log)
    channels.events.put({"kind": "done", "role": "producer", "index": plan.index})


async def _publish_loop(driver: Driver, nc: Any, log: _SentLog, factory: PayloadFactory, pid: int) -> None:
    """The open loop: sleep until each intended time (never past it), stamp, send, move on."""
    intended = log.intended
    behind = 0
    for seq in range(intended.size):
        due = int(intended[seq])
        message = factory.prepare(pid, seq, due)
        delay = due - now_ns()
        if delay > 0:
            await asyncio.sleep(delay * 1e-9)
            behind = 0
        else:
            behind += 1
            if behind % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
        sent = now_ns()
        try:
            await driver.send(nc, factory.stamp(message, sent), seq, log.on_ack)
            log.sent[seq] = sent
            log.fresh_sends.append(seq)
        except Exception as exc:
            log.errors[seq] = type(exc).__name__
        log.attempted = seq + 1


async def _await_acks(driver: Driver, log: _SentLog, deadline_ns: int) -> None:
    """Wait for outstanding acks; what has not arrived by the deadline counts as unacked."""
    if not driver.acks:
        return
    while log.acked_count + len(log.errors) < log.attempted and now_ns() < deadline_ns:
        await asyncio.sleep(0.01)


async def _request_loop(
    driver: Driver, nc: Any, log: _SentLog, factory: PayloadFactory, pid: int, seqs: np.ndarray, w: Any
) -> None:
    """One synchronous rtt connection: a request cannot leave before the previous reply, but its
    latency is still measured from its intended time (wrk2's correction)."""
    for seq in seqs.tolist():
        due = int(log.intended[seq])
        message = factory.prepare(pid, seq, due)
        delay = due - now_ns()
        if delay > 0:
            await asyncio.sleep(delay * 1e-9)
        sent = now_ns()
        log.sent[seq] = sent
        log.fresh_sends.append(seq)
        log.attempted += 1
        try:
            await driver.request(nc, factory.stamp(message, sent), w.request_timeout_s)
            log.on_ack(seq, None, None, None)
        except Exception as exc:
            log.errors[seq] = type(exc).__name__


def _send_progress(plan: WorkerPlan, channels: Channels, log: _SentLog) -> None:
    sends, log.fresh_sends = log.fresh_sends, []
    acks, log.fresh_acks = log.fresh_acks, []
    lag_idx = np.asarray(sends, dtype=np.int64)
    ack_idx = np.asarray(acks, dtype=np.int64)
    channels.events.put(
        {
            "kind": "progress",
            "role": "producer",
            "index": plan.index,
            "attempted": log.attempted,
            "acked": log.acked_count,
            "errors": len(log.errors),
            "lag_ns": log.sent[lag_idx] - log.intended[lag_idx],
            "ack_intended_ns": log.acked[ack_idx] - log.intended[ack_idx],
            "ack_sent_ns": log.acked[ack_idx] - log.sent[ack_idx],
            "ack_at_ns": log.intended[ack_idx],
        }
    )


async def _report_producer(plan: WorkerPlan, channels: Channels, log: _SentLog) -> None:
    while True:
        await asyncio.sleep(REPORT_EVERY_S)
        _send_progress(plan, channels, log)


_RECEIVED_FIELDS = (
    "pid",
    "seq",
    "intended",
    "sent",
    "received",
    "partition",
    "offset",
    "hop",
    "relay_received",
    "relay_sent",
)


class _ReceivedLog:
    """One tuple per received message, appended in one step: the callback may run in a driver thread
    while the reporter reads, and a single `list.append` is atomic, so the reporter never sees half a row."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.reported = 0
        self.bad = 0

    def on_message(self, data: bytes, partition: int | None, offset: int | None) -> None:
        received = now_ns()
        try:
            h = decode_header(data)
            relay_received, relay_sent = decode_relay_stamp(data) if h.hop else (-1, -1)
        except PayloadError:
            self.bad += 1
            return
        self.rows.append(
            (
                h.producer_id,
                h.seq,
                h.intended_ns,
                h.sent_ns,
                received,
                -1 if partition is None else partition,
                -1 if offset is None else offset,
                h.hop + 1 if h.hop else 0,  # the chain's final hop (2), or 0 outside a chain
                relay_received,
                relay_sent,
            )
        )

    def count(self) -> int:
        return len(self.rows)

    def columns(self, start: int = 0, end: int | None = None) -> dict[str, np.ndarray]:
        block = np.array(self.rows[start:end], dtype=np.int64).reshape(-1, len(_RECEIVED_FIELDS))
        return {name: block[:, i] for i, name in enumerate(_RECEIVED_FIELDS)}

    def table(self, consumer_id: int, plan: PhasePlan) -> pa.Table:
        c = self.columns()
        n = c["seq"].size
        phases = np.array(PHASE_NAMES, dtype=object)[plan.phases_of(c["intended"])]
        return pa.table(
            {
                "consumer_id": pa.array(np.full(n, consumer_id, dtype=np.int32)),
                "producer_id": pa.array(c["pid"].astype(np.int32)),
                "seq": pa.array(c["seq"]),
                "intended_ns": pa.array(c["intended"]),
                "sent_ns": pa.array(c["sent"]),
                "received_ns": pa.array(c["received"]),
                "partition": pa.array(c["partition"].astype(np.int32), mask=c["partition"] < 0),
                "offset": pa.array(c["offset"], mask=c["offset"] < 0),
                "leader": pa.nulls(n, pa.int32()),  # attributed from the leader timeline when the cell lands
                "hop": pa.array(c["hop"].astype(np.int8)),
                "relay_received_ns": pa.array(c["relay_received"], mask=c["relay_received"] < 0),
                "relay_sent_ns": pa.array(c["relay_sent"], mask=c["relay_sent"] < 0),
                "phase": pa.array(phases, pa.string()),
            },
            schema=RECEIVED_SCHEMA,
        )


def _consumer_progress(plan: WorkerPlan, channels: Channels, log: _ReceivedLog) -> None:
    start, end = log.reported, log.count()
    log.reported = end
    c = log.columns(start, end)
    channels.events.put(
        {
            "kind": "progress",
            "role": "consumer",
            "index": plan.index,
            "received": end,
            "bad": log.bad,
            "e2e_intended_ns": c["received"] - c["intended"],
            "e2e_sent_ns": c["received"] - c["sent"],
            "e2e_at_ns": c["intended"],
        }
    )


async def _consume(plan: WorkerPlan, channels: Channels) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, plan.route, client=plan.client)
    log = _ReceivedLog()
    await driver.open_consumer(f"sixnines-c{plan.index}", log.on_message)
    _freeze_setup_heap()
    channels.events.put({"kind": "ready", "role": "consumer", "index": plan.index})
    while not channels.stop.is_set():
        await asyncio.sleep(REPORT_EVERY_S)
        _consumer_progress(plan, channels, log)
    await driver.close()
    t0 = int(channels.start_at_ns.value)
    write_parquet(
        log.table(plan.index, _phase_plan(t0, channels)),
        Path(plan.staging_dir) / f"received-c{plan.index}.parquet",
    )
    _consumer_progress(plan, channels, log)
    channels.events.put({"kind": "done", "role": "consumer", "index": plan.index})


async def _count_consumer(plan: WorkerPlan, channels: Channels) -> None:
    """An unmeasured consumer, counted but never timed: a lagging one reads the measured topic's backlog
    from its oldest message (seed 003); a background one reads its background workload (seed 004)."""
    cell = plan.cell()
    if plan.role == "bg_consumer":
        spec, route = background_spec(cell, cell.background[plan.background]), background_route(plan.background)
    else:
        spec, route = cell, MEASURED
    driver = driver_for(plan.url, spec, plan.names or plan.cell_id, route, client=plan.client)
    consumed = [0]

    def count(_data: bytes, _partition: int | None, _offset: int | None) -> None:
        consumed[0] += 1

    name = f"sixnines-{'l' if plan.role == 'laggard' else 'bgc'}{plan.index}"
    await driver.open_consumer(name, count, lagging=plan.role == "laggard")
    channels.events.put({"kind": "ready", "role": plan.role, "index": plan.index})

    def progress() -> None:
        channels.events.put(
            {
                "kind": "progress",
                "role": plan.role,
                "index": plan.index,
                "background": plan.background,
                "consumed": consumed[0],
            }
        )

    while not channels.stop.is_set():
        await asyncio.sleep(REPORT_EVERY_S)
        progress()
    await driver.close()
    progress()
    channels.events.put({"kind": "done", "role": plan.role, "index": plan.index})


async def _relay(plan: WorkerPlan, channels: Channels) -> None:
    """The service of a two-hop chain (seed 002): consume the first topic, forward each message to the
    second with the producer's header untouched (so the final consumer still measures from the original
    intended time) and this relay's receive and send times stamped in. Its own receipts land as hop-1 rows
    in relayed-r<i>.parquet, so a loss can be placed on the hop where it happened."""
    cell = plan.cell()
    inbound = driver_for(plan.url, cell, plan.names or plan.cell_id, MEASURED, client=plan.client)
    outbound = driver_for(plan.url, cell, plan.names or plan.cell_id, HOP2, client=plan.client)
    (conn,) = await outbound.open_producer(f"sixnines-relay{plan.index}", 1)
    loop = asyncio.get_running_loop()
    arrivals: asyncio.Queue[tuple[bytes, int, int, int]] = asyncio.Queue()
    log = _ReceivedLog()
    counts = {"relayed": 0, "forward_errors": 0}

    def on_message(data: bytes, partition: int | None, offset: int | None) -> None:
        received = now_ns()  # the hop-1 arrival, read in whichever thread the client delivers on
        item = (data, received, -1 if partition is None else partition, -1 if offset is None else offset)
        loop.call_soon_threadsafe(arrivals.put_nowait, item)

    def on_forward_ack(_seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        if error is not None:
            counts["forward_errors"] += 1

    async def forward() -> None:
        while True:
            data, received, partition, offset = await arrivals.get()
            try:
                h = decode_header(data)
                message = relay(data, received)
            except PayloadError:
                log.bad += 1
                continue
            sent = now_ns()
            try:
                await outbound.send(conn, stamp_relay_sent(message, sent), counts["relayed"], on_forward_ack)
            except Exception:
                counts["forward_errors"] += 1
                sent = -1
            counts["relayed"] += 1
            log.rows.append(
                (h.producer_id, h.seq, h.intended_ns, h.sent_ns, received, partition, offset, 1, received, sent)
            )

    def progress() -> None:
        channels.events.put({"kind": "progress", "role": "relay", "index": plan.index, **counts, "bad": log.bad})

    forwarder = asyncio.create_task(forward())
    await inbound.open_consumer(f"sixnines-r{plan.index}", on_message)
    _freeze_setup_heap()
    channels.events.put({"kind": "ready", "role": "relay", "index": plan.index})
    try:
        while not channels.stop.is_set():
            await asyncio.sleep(REPORT_EVERY_S)
            progress()
        await inbound.close()
        while not arrivals.empty() and not forwarder.done():  # forward what had already arrived
            await asyncio.sleep(0.01)
        forwarder.cancel()
        await outbound.close()
    finally:
        t0 = int(channels.start_at_ns.value)
        write_parquet(
            log.table(plan.index, _phase_plan(t0, channels)), Path(plan.staging_dir) / f"relayed-r{plan.index}.parquet"
        )
    progress()
    channels.events.put({"kind": "done", "role": "relay", "index": plan.index})


async def _background(plan: WorkerPlan, channels: Channels) -> None:
    """Some of a background workload's logical producers, multiplexed on one loop and one client: each
    keeps its own fixed-rate schedule (interleaved with the others, as independent producers would be) and,
    with per-producer keys, its own key. Open loop like the measured producers; counted, never timed."""
    cell = plan.cell()
    bg = cell.background[plan.background]
    route = background_route(plan.background)
    driver = driver_for(plan.url, background_spec(cell, bg), plan.names or plan.cell_id, route, client=plan.client)
    duration_ns = sum(channels.phase_ns)
    mine = range(plan.part, bg.producers, bg.processes)
    parts = [
        stream_offsets_ns(bg.rate_per_s, bg.producers, i, duration_ns, bg.arrival, cell.workload.seed) for i in mine
    ]
    offsets = np.concatenate(parts)
    stream_of = np.concatenate([np.full(p.size, i, dtype=np.int32) for i, p in zip(mine, parts, strict=True)])
    order = np.argsort(offsets, kind="stable")
    offsets, stream_of = offsets[order], stream_of[order]
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

    channels.events.put({"kind": "ready", "role": "background", "index": plan.index, "messages": offsets.size})
    t0 = await _wait_for_start(channels)
    intended = offsets + t0
    next_report = now_ns() + int(REPORT_EVERY_S * NS_PER_S)
    try:
        for n in range(intended.size):
            due, stream = int(intended[n]), int(stream_of[n])
            message = factory.prepare(stream, n, due)
            delay = due - now_ns()
            if delay > 0:
                await asyncio.sleep(delay * 1e-9)
            elif n % _YIELD_EVERY == 0:
                await asyncio.sleep(0)
            sent = now_ns()
            try:
                await driver.send(conn, factory.stamp(message, sent), n, on_ack, stream)
                lag[n] = sent - due
                counts["sent"] += 1
            except Exception:
                counts["errors"] += 1
            if sent >= next_report:
                progress()
                next_report = sent + int(REPORT_EVERY_S * NS_PER_S)
        deadline = now_ns() + int(cell.workload.request_timeout_s * NS_PER_S)
        while driver.acks and counts["acked"] + counts["errors"] < counts["scheduled"] and now_ns() < deadline:
            await asyncio.sleep(0.01)
    finally:
        await driver.close()
    progress("done")


async def _respond(plan: WorkerPlan, channels: Channels) -> None:
    cell = plan.cell()
    driver = driver_for(plan.url, cell, plan.names or plan.cell_id, client=plan.client)
    served = [0]

    def count() -> None:
        served[0] += 1

    await driver.open_responder(f"sixnines-r{plan.index}", count)
    channels.events.put({"kind": "ready", "role": "responder", "index": plan.index})
    while not channels.stop.is_set():
        await asyncio.sleep(REPORT_EVERY_S)
        channels.events.put({"kind": "progress", "role": "responder", "index": plan.index, "served": served[0]})
    await driver.close()
    channels.events.put({"kind": "done", "role": "responder", "index": plan.index})
