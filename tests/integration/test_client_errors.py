"""What a client reports beside its messages, on a real nats-server: a JetStream consumer that falls behind
has messages dropped by nats-py's bounded pending queue (a slow consumer); each one is counted, so every
message sent is either handed to the harness or counted as dropped, never lost in silence."""

from __future__ import annotations

import asyncio
import os
import signal
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
    # A dropped message is never acked by the harness, so the server delivers it again after the ack wait and
    # it can be dropped again: on a loaded host (CI, 3 workers) 3,000 sent showed 5,872 drops. Each message is
    # delivered once within this test.
    monkeypatch.setattr(nats_driver, "JS_ACK_WAIT_S", 60.0)
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


STALLED = 5000  # more than nats-py's default of 4,000 JetStream publishes awaiting their acks


def test_jetstream_publishes_never_wait_for_acks_of_a_stalled_server(tmp_path: Path) -> None:
    """A stalled server acknowledges nothing: the open loop must go on handing messages to the client (they wait in
    its buffer, and their latency counts from their intended time), not block once 4,000 acks are outstanding."""
    spec = make_cell(broker={"mode": "jetstream", "storage": "memory"}).spec
    with NatsServer(bundled_version(), spec.broker, tmp_path / "nats") as server:
        assert server.endpoint is not None
        handed_s, acked = asyncio.run(_send_while_stalled(server.endpoint.url, spec, server.endpoint.pid))
    assert handed_s is not None, f"send_batch was still blocked {HANDED_WITHIN_S} s into the stall"
    assert acked == STALLED  # once the server runs again, every publish is acknowledged


HANDED_WITHIN_S = 2.0


async def _send_while_stalled(url: str, spec, pid: int) -> tuple[float | None, int]:
    """(seconds `send_batch` took while the server was stopped, or None if it had not returned by then; acks)."""
    driver = NatsDriver(url, spec, "stalled")
    acks = [0]

    def on_ack(_seq: int, _partition: int | None, _offset: int | None, error: str | None) -> None:
        acks[0] += error is None

    try:
        await driver.prepare()
        (nc,) = await driver.open_producer("p0", 1)
        os.kill(pid, signal.SIGSTOP)
        try:
            began = time.monotonic()
            sending = asyncio.ensure_future(driver.send_batch(nc, ((i, 0, b"x" * 64) for i in range(STALLED)), on_ack))
            done, _ = await asyncio.wait({sending}, timeout=HANDED_WITHIN_S)
            handed_s = time.monotonic() - began if done else None
        finally:
            os.kill(pid, signal.SIGCONT)  # a blocked send_batch goes on as the acks come
        assert await sending == {}
        deadline = time.monotonic() + 30
        while acks[0] < STALLED and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        return handed_s, acks[0]
    finally:
        await driver.cleanup()
        await driver.close()
