"""What a client reports beside its messages, on a real nats-server: a JetStream consumer that falls behind
has messages dropped by nats-py's bounded pending queue (a slow consumer); each one is counted, so every
message sent is either handed to the harness or counted as dropped, never lost in silence."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from bench_tasks.load.driver import Received
from bench_tasks.systems.nats import driver as nats_driver
from bench_tasks.systems.nats.driver import NatsDriver
from bench_tasks.systems.nats.release import bundled_version
from bench_tasks.systems.nats.server import NatsServer

from .helpers import make_cell

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]  # no cell: a drop count, no latency
SENT = 3000


def test_a_jetstream_consumer_that_falls_behind_counts_every_drop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nats_driver, "JS_PENDING_MSGS", 50)  # a queue a burst overflows
    spec = make_cell(broker={"mode": "jetstream", "storage": "memory"}).spec
    with NatsServer(bundled_version(), spec.broker, tmp_path / "nats") as server:
        assert server.endpoint is not None
        received, acked, dropped = asyncio.run(_send_to_a_slow_consumer(server.endpoint.url, spec))
    assert acked == SENT  # the server took every message
    assert dropped > 0, "the slow consumer dropped nothing: the test did not overflow the queue"
    assert received + dropped == SENT, (received, dropped)


async def _send_to_a_slow_consumer(url: str, spec) -> tuple[int, int, int]:
    driver = NatsDriver(url, spec, "slowconsumer")
    got, acks = [0], [0]

    def slow(batch: Received) -> None:  # blocks the loop a little per message: the parser's reads pile up
        got[0] += len(batch.payloads())
        time.sleep(0.0005)

    def on_ack(_seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        acks[0] += error is None

    try:
        await driver.prepare()
        await driver.open_consumer("c0", slow)
        (nc,) = await driver.open_producer("p0", 1)
        assert await driver.send_batch(nc, ((i, 0, b"x" * 64) for i in range(SENT)), on_ack) == {}
        deadline = time.monotonic() + 30
        while (acks[0] < SENT or got[0] + driver.errors.dropped < SENT) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return got[0], acks[0], driver.errors.dropped
    finally:
        await driver.cleanup()
        await driver.close()
