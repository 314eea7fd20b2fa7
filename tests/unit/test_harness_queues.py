"""Queues inside the harness are bounded and what overflows them is counted: a relay's forwarding queue drops
whole batches past its limit (and says how many messages), a client's errors are counted by kind, the first of
each logged, never swallowed; a worker's facts add them up for the saturation verdict."""

from __future__ import annotations

import asyncio
import logging
import threading
from types import SimpleNamespace

import pytest

from bench_tasks.load.driver import ClientErrors
from bench_tasks.load.relay import RelayQueue
from bench_tasks.load.selffacts import client_facts


class Batch:
    def __init__(self, n: int):
        self._payloads = [b"x"] * n

    def payloads(self) -> list[bytes]:
        return self._payloads

    def partitions(self) -> None:
        return None

    def offsets(self) -> None:
        return None


def test_a_full_relay_queue_drops_and_counts_whole_batches() -> None:
    async def scenario() -> tuple[RelayQueue, list[int]]:
        queue = RelayQueue(asyncio.get_running_loop(), limit=10)
        offers = threading.Thread(target=lambda: [queue.offer(i, Batch(4)) for i in range(4)])  # a driver thread
        offers.start()
        offers.join()
        await asyncio.sleep(0.01)  # the offers run on the loop
        assert (queue.held, queue.dropped) == (8, 8)  # two batches of 4 fit in 10; the other two are dropped
        got = [(await queue.get())[0] for _ in range(2)]
        assert queue.held == 0 and queue.empty()
        queue.offer(9, Batch(10))
        await asyncio.sleep(0.01)
        return queue, got

    queue, got = asyncio.run(scenario())
    assert got == [0, 1] and queue.held == 10 and queue.dropped == 8


def test_client_errors_are_counted_by_kind_and_the_first_of_each_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="sixnines.driver")
    errors = ClientErrors()
    for _ in range(3):
        errors.error("_TRANSPORT", "nats://bench:hunter2@10.0.0.1:4222 connection refused")
    errors.error("_AUTHENTICATION", "SASL failed")
    errors.drop(5)
    errors.drop()
    assert errors.summary() == {
        "count": 4,
        "kinds": {"_TRANSPORT": 3, "_AUTHENTICATION": 1},
        "last": "_AUTHENTICATION: SASL failed",
    }
    assert errors.dropped == 6
    logged = [r.getMessage() for r in caplog.records]
    assert len(logged) == 3 and "hunter2" not in caplog.text  # one per kind, one for the first drop
    assert "nats://10.0.0.1:4222 connection refused" in logged[0]


def test_a_workers_facts_add_up_its_clients() -> None:
    inbound, outbound = ClientErrors(), ClientErrors()
    inbound.error("SlowConsumer", "x")
    inbound.drop(3)
    outbound.error("_MSG_TIMED_OUT", "y")
    drivers = [SimpleNamespace(errors=inbound), SimpleNamespace(errors=outbound)]
    assert client_facts(drivers, dropped=2) == {
        "client_errors": {"count": 2, "kinds": {"SlowConsumer": 1, "_MSG_TIMED_OUT": 1}, "last": "_MSG_TIMED_OUT: y"},
        "dropped": 5,
    }
