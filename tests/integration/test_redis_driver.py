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


def _streams_cell() -> RedisCell:
    return RedisCell.model_validate({**_cell().model_dump(mode="json"), "broker": {"mode": "streams"}})


@pytest.mark.parametrize("mode", ["pubsub", "streams"])
def test_control_calls_to_a_frozen_server_time_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """A frozen server (SIGSTOP) still takes connections (the kernel completes them) and answers nothing: the
    driver's control calls (prepare's DEL and XGROUP, a subscriber's SUBSCRIBE, a group reader's PING, cleanup)
    must give up after the control timeout, naming it, rather than hold the cell forever."""
    from bench_tasks.errors import BrokerError
    from bench_tasks.systems.redis import client

    monkeypatch.setattr(client, "CONTROL_TIMEOUT_S", 1.0)
    cell = _streams_cell() if mode == "streams" else _cell()
    with RedisServers("latest", RedisBroker(), tmp_path) as servers:
        assert servers.endpoint is not None
        url = servers.endpoint.url

        async def scenario() -> None:
            driver = RedisDriver(url, cell, "frozen", client={"password": servers.password})
            calls = [lambda: driver.open_consumer("c0", lambda _batch: None)]
            if mode == "streams":
                calls.insert(0, driver.prepare)
            servers.pause(1)
            try:
                for call in calls:
                    began = asyncio.get_running_loop().time()
                    with pytest.raises(BrokerError, match="no answer within 1 s"):
                        await asyncio.wait_for(call(), 10)
                    assert asyncio.get_running_loop().time() - began < 5
                await asyncio.wait_for(driver.cleanup(), 10)  # gives up too (a teardown goes on)
            finally:
                servers.resume(1)
                await driver.close()

        asyncio.run(scenario())


@pytest.mark.parametrize("mode", ["pubsub", "streams"])
def test_a_lost_connection_is_closed_and_forgotten(tmp_path: Path, mode: str) -> None:
    """After the server is killed and started again, a consumer reads on a new connection; the lost one is
    closed and no longer held (a driver that ran through many losses holds only what it uses)."""
    cell = _streams_cell() if mode == "streams" else _cell()
    with RedisServers("latest", RedisBroker(), tmp_path) as servers:
        assert servers.endpoint is not None
        url = servers.endpoint.url

        async def scenario() -> None:
            driver = RedisDriver(url, cell, "lost", client={"password": servers.password})
            await driver.prepare()
            await driver.open_consumer("c0", lambda _batch: None)
            lost = driver._watched
            assert lost is not None and driver.connections == [lost]
            servers.kill(1)
            await _until(lambda: driver.errors.kinds.get("connection_lost", 0) >= 1)
            servers.restart(1)
            await _until(lambda: driver._watched is not lost, timeout_s=10)
            assert driver._watched is not lost, "the consumer did not connect again"
            assert driver.connections == [driver._watched]
            assert not lost.is_connected
            await driver.close()

        asyncio.run(scenario())
