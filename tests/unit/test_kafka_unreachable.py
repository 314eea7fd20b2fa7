"""The Kafka driver against a cluster that takes nothing (an address where no broker listens, through a real
librdkafka): the prefill ends with an error saying how far the backlog got, never a wait without end or a
silent gap; a consumer's errors are counted and logged, not dropped."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from bench_tasks.errors import BrokerError
from bench_tasks.systems.kafka import driver as kafka_driver
from bench_tasks.systems.kafka.driver import KafkaDriver
from bench_tasks.systems.kafka.settings import KafkaBroker
from tests.integration.helpers import make_cell

NOWHERE = "127.0.0.1:9"  # the discard port: nothing listens there


def prefill(client: dict, messages: int) -> None:
    cell = SimpleNamespace(broker=KafkaBroker(partitions=2))
    driver = KafkaDriver(NOWHERE, cell, "c", client=client)
    asyncio.run(driver.prefill(messages, 64, lambda _done: None))


def test_a_queue_that_stays_full_ends_the_prefill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_driver, "PREFILL_STALL_S", 1.0)
    began = time.monotonic()
    with pytest.raises(BrokerError, match=r"stayed full for 1 s without a delivery, 0 of 50 messages written"):
        prefill({"queue.buffering.max.messages": 5, "message.timeout.ms": 600_000}, 50)
    assert time.monotonic() - began < 30


def test_refused_messages_fail_the_prefill_with_the_first_reason() -> None:
    with pytest.raises(BrokerError, match=r"0 of 5 messages written, 5 refused.*first refusal: .*[Tt]imed out"):
        prefill({"message.timeout.ms": 300}, 5)


def test_a_consumers_errors_are_counted_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's error events (here: no broker to connect to) reach the driver's counts and the log."""
    client = {"consumer_mode": "assigned", "start_from": "beginning"}  # assigned at once: no broker asked
    spec = make_cell(system="kafka", client=client).spec  # `latest`, unresolved: no broker is asked
    driver = KafkaDriver(NOWHERE, spec, "c")

    async def scenario() -> None:
        await driver.open_consumer("sixnines-c0", lambda _batch: None)
        deadline = time.monotonic() + 20
        while "_TRANSPORT" not in driver.errors.kinds and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await driver.close()

    asyncio.run(scenario())
    assert driver.errors.kinds.get("_TRANSPORT", 0) >= 1, driver.errors.kinds
    assert driver.errors.last is not None
    assert "client error _TRANSPORT: 127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed" in caplog.text
