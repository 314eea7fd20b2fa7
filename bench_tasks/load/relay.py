"""The service of a two-hop chain (seed 002): consume the first route, forward to the second with the producer's
header untouched and the relay's own receive and send times stamped in."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np

from ..core.saturation import ProcessWatch
from ..errors import PayloadError
from .driver import Driver, Outgoing, Received
from .drivers import driver_for
from .pacing import REPORT_EVERY_S, phase_plan
from .payload import decode_header, relay, stamp_relay_sent
from .plan import Channels, Clock, WorkerPlan
from .receivedlog import COLUMN, Arrivals, ReceivedLog
from .routes import HOP2, MEASURED
from .selffacts import ready, report_harness

# Received messages a relay holds for forwarding at most; a batch beyond it is dropped and counted, which fails
# the cell (the harness lost it). A queue that deep already fails the cell for its backlog before it fills.
RELAY_QUEUE_MESSAGES = 1 << 17


async def forward_chain(plan: WorkerPlan, channels: Channels, now_ns: Clock) -> None:
    """The service of a two-hop chain (seed 002): consume the first topic, forward each message to the
    second with the producer's header untouched (so the final consumer still measures from the original
    intended time) and this relay's receive and send times stamped in. Its own receipts land as hop-1 rows
    in relayed-r<i>.parquet, so a loss can be placed on the hop where it happened."""
    cell = plan.cell()
    inbound = driver_for(plan.url, cell, plan.names or plan.cell_id, MEASURED, client=plan.client)
    outbound = driver_for(plan.url, cell, plan.names or plan.cell_id, HOP2, client=plan.client)
    (conn,) = await outbound.open_producer(f"sixnines-relay{plan.index}", 1)
    waiting = RelayQueue(asyncio.get_running_loop(), RELAY_QUEUE_MESSAGES)
    relaying = Relaying(outbound, conn, now_ns)
    watch = ProcessWatch(clock=now_ns, message_threads=(*inbound.message_threads, *outbound.message_threads))
    stamps = Arrivals(now_ns)
    inbound.watch_arrivals(stamps.mark)

    def on_messages(batch: Received) -> None:
        received = stamps.stamp(now_ns())  # the hop-1 arrival, in whichever thread the client delivers on
        waiting.offer(received, batch)

    async def forward() -> None:
        while True:
            await relaying.forward(*await waiting.get())

    def progress() -> None:
        counts = {**relaying.counts(), "dropped": waiting.dropped}
        channels.events.put({"kind": "progress", "role": "relay", "index": plan.index, **counts})

    forwarder = asyncio.create_task(forward())
    await inbound.open_consumer(f"sixnines-r{plan.index}", on_messages)
    ready(plan, channels)
    try:
        while not channels.stop.is_set():
            await asyncio.sleep(REPORT_EVERY_S)
            if forwarder.done():  # it only ends by failing: surface why, or nothing would be relayed silently
                forwarder.result()
            watch.sample(inbound.backlog(), relaying.log.count + waiting.held)
            progress()
        await inbound.close()
        while not waiting.empty() and not forwarder.done():  # forward what had already arrived
            await asyncio.sleep(0.01)
        forwarder.cancel()
        await outbound.close()
    finally:
        t0 = int(channels.start_at_ns.value)
        relaying.log.write(
            plan.index, phase_plan(t0, channels), Path(plan.staging_dir) / f"relayed-r{plan.index}.parquet"
        )
    progress()
    report_harness(plan, channels, watch, t0, [inbound, outbound], dropped=waiting.dropped)
    channels.events.put({"kind": "done", "role": "relay", "index": plan.index})


class RelayQueue:
    """Received batches waiting for the relay's forwarder, kept on its event loop: at most `limit` messages.
    A batch that does not fit is dropped and counted (`dropped`: the cell fails, the harness lost them), so a
    forwarder that falls behind never grows the queue without end. `offer` may be called from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit: int):
        self.loop, self.limit = loop, limit
        self.held = self.dropped = 0
        self._queue: asyncio.Queue[tuple[int, Received, int]] = asyncio.Queue()

    def offer(self, received: int, batch: Received) -> None:
        self.loop.call_soon_threadsafe(self._put, received, batch)

    def _put(self, received: int, batch: Received) -> None:
        n = len(batch.payloads())
        if self.held + n > self.limit:
            self.dropped += n
            return
        self.held += n
        self._queue.put_nowait((received, batch, n))

    async def get(self) -> tuple[int, Received]:
        received, batch, n = await self._queue.get()
        self.held -= n
        return received, batch

    def empty(self) -> bool:
        return self._queue.empty()


class Relaying:
    """A relay's forwarding: each received batch goes on to the second hop, every message with the relay's
    receive time written in and its send time stamped as the client takes it; its hop-1 rows are logged."""

    def __init__(self, outbound: Driver, conn: Any, clock: Clock):
        self.outbound, self.conn, self.clock = outbound, conn, clock
        self.log = ReceivedLog(clock)
        self.relayed = self.forward_errors = 0

    def counts(self) -> dict[str, int]:
        return {"relayed": self.relayed, "forward_errors": self.forward_errors, "bad": self.log.bad}

    def on_forward_ack(self, _seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        if error is not None:
            self.forward_errors += 1

    async def forward(self, received: int, batch: Received) -> None:
        payloads = batch.payloads()
        partitions, offsets = batch.partitions(), batch.offsets()
        rows: list[list[int]] = []  # RECEIVED_FIELDS; relay_sent (index 9) filled in once the client took it
        sent: dict[int, int] = {}

        def outgoing() -> Outgoing:
            for k, data in enumerate(payloads):
                try:
                    h = decode_header(data)
                    message = relay(data, received)
                except PayloadError:
                    self.log.bad += 1
                    continue
                part = -1 if partitions is None else partitions[k]
                off = -1 if offsets is None else offsets[k]
                rows.append(
                    [h.producer_id, h.seq, h.intended_ns, h.sent_ns, received, part, off, 1, received, -1, received]
                )
                sent[len(rows) - 1] = self.clock()
                yield len(rows) - 1, 0, stamp_relay_sent(message, sent[len(rows) - 1])

        refused = await self.outbound.send_batch(self.conn, outgoing(), self.on_forward_ack)
        for row, stamp in sent.items():
            rows[row][COLUMN["relay_sent"]] = -1 if row in refused else stamp
        self.forward_errors += len(refused)
        self.relayed += len(rows)
        if rows:
            self.log.append(np.array(rows, dtype=np.int64).T)
