"""The Redis driver against a real server, without a cell: after the server is killed and started again on its
port, a pub/sub sender and subscriber carry messages again on their own, having counted what they lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench_tasks.systems.redis.driver import RECONNECT_PAUSE_S, RedisDriver
from bench_tasks.systems.redis.nodes import RedisServers
from bench_tasks.systems.redis.settings import RedisBroker, RedisCell

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]


def _cell() -> RedisCell:
    return RedisCell.model_validate(
        {
            "system": "redis",
            "version": "latest",
            "workload": {"message_size_bytes": 64, "rate_per_s": 10, "measure_s": 1},
            "measurement": "e2e",
        }
    )


async def _send(driver: RedisDriver, sender: object, seqs: range) -> dict[int, str]:
    return await driver.send_batch(sender, iter((s, 0, b"m%d" % s) for s in seqs), lambda *_: None)


async def _until(check: object, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check() and asyncio.get_running_loop().time() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.02)


def test_pubsub_sender_and_subscriber_come_back_after_a_restart(tmp_path: Path) -> None:
    with RedisServers("latest", RedisBroker(), tmp_path) as servers:
        assert servers.endpoint is not None

        async def scenario() -> None:
            driver = RedisDriver(servers.endpoint.url, _cell(), "restart", client={"password": servers.password})
            got: list[bytes] = []
            await driver.open_consumer("c0", lambda batch: got.extend(batch.payloads()))
            (sender,) = await driver.open_producer("p0", 1)
            subscribed = driver._watched
            assert await _send(driver, sender, range(0, 10)) == {}
            await _until(lambda: len(got) == 10)
            servers.kill(1)
            await _until(lambda: driver.errors.kinds.get("connection_lost", 0) >= 2)  # sender and subscriber
            refused = await _send(driver, sender, range(10, 20))
            assert set(refused) == set(range(10, 20))
            servers.restart(1)
            await _until(lambda: driver._watched is not subscribed)  # the subscriber subscribed again
            await asyncio.sleep(RECONNECT_PAUSE_S)  # the sender's pause between attempts has passed
            assert await _send(driver, sender, range(20, 30)) == {}
            await _until(lambda: len(got) == 20)
            await driver.close()
            assert got == [b"m%d" % s for s in (*range(10), *range(20, 30))]

        asyncio.run(scenario())
