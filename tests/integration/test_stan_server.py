"""A real nats-streaming-server (built by `make venv`) per test, on free loopback ports, driven through the
broker-control protocol the cell's life uses (`NodeBrokers`): each store starts and reports its version, publishes
are acknowledged, a frozen server acknowledges nothing until thawed, a killed file store keeps every acknowledged
message across a restart, a setting the server refuses is named, and nothing is left running."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from bench_tasks.brokers.handles import NodeBrokers
from bench_tasks.errors import BrokerError
from bench_tasks.systems.stan import STAN
from bench_tasks.systems.stan import client as stan
from bench_tasks.systems.stan.release import reported_version
from bench_tasks.systems.stan.server import StanServer, monitor
from bench_tasks.systems.stan.settings import StanCell
from tests.integration.helpers import STAN_RELEASE

pytestmark = pytest.mark.alongside

SUBJECT = "sixnines.itest"


def spec(broker: dict[str, Any], size: int = 256) -> StanCell:
    return StanCell.model_validate(
        {
            "system": "stan",
            "version": "latest",
            "broker": broker,
            "workload": {"message_size_bytes": size, "rate_per_s": 50, "measure_s": 1},
            "measurement": "publish",
        }
    )


def start(broker: dict[str, Any], workdir: Path, size: int = 256) -> NodeBrokers:
    s = spec(broker, size)
    version = STAN.resolve_version(s.version)
    return NodeBrokers(
        STAN, STAN.start_brokers(s.model_copy(update={"version": version}), "itest", workdir, True, "127.0.0.1")
    )


def login(handle: NodeBrokers) -> dict[str, Any]:
    """The cell's user and password (every server asks for them)."""
    return {k: v for k, v in handle.client.items() if k in ("user", "password")}


async def publish(handle: NodeBrokers, count: int, size: int = 64, client_id: str = "pub") -> list[str | None]:
    """Publish `count` messages and wait for their PubAcks; returns each one's outcome (None: acknowledged)."""
    nc = await nats.connect(handle.address, **login(handle))
    conn = await stan.connect(nc, handle.client["cluster_id"], client_id, owns_nc=True)
    outcomes: list[str | None] = []
    for i in range(count):
        await conn.publish(SUBJECT, i.to_bytes(4, "big") * (size // 4), outcomes.append)
    await conn.wait_for_acks(10)
    await conn.close()
    return outcomes


async def read_all(handle: NodeBrokers, expected: int) -> list[int]:
    """Every stored message of the channel from the first, by sequence."""
    nc = await nats.connect(handle.address, **login(handle))
    conn = await stan.connect(nc, handle.client["cluster_id"], "reader", owns_nc=True)
    got: list[int] = []
    await conn.subscribe(SUBJECT, lambda m: got.append(m.sequence), stan.SubscriptionOptions(start_position="first"))
    for _ in range(200):
        if len(got) >= expected:
            break
        await asyncio.sleep(0.02)
    await conn.close()
    return got


@pytest.mark.parametrize(
    ("broker", "store", "file_sync"),
    [
        ({"store": "memory"}, "memory", None),
        ({"store": "file"}, "file", True),
        ({"store": "file", "file_sync": False}, "file", False),
    ],
    ids=["memory", "file_sync", "file_nosync"],
)
def test_each_store_starts_reports_its_version_and_acknowledges(
    broker: dict[str, Any], store: str, file_sync: bool | None, tmp_path: Path, no_orphans: None
) -> None:
    handle = start(broker, tmp_path)
    try:
        context = handle.context()
        assert context["version"] == STAN_RELEASE
        assert context["nats_server"].startswith("v2.")
        assert (context["store"], context["file_sync"]) == (store, file_sync)
        assert f'"sync_on_flush": {str(file_sync).lower()}' in context["config"] or store == "memory"
        assert handle.alive() == {0: True}
        assert asyncio.run(publish(handle, 20)) == [None] * 20
        assert monitor(context["monitor_url"], "serverz")["total_msgs"] == 20
        assert STAN.describe_running(handle.state())[1].startswith("clients 0  channels 1  msgs 20")
    finally:
        pids = handle.pids()
        assert handle.stop() == pids
    assert handle.alive() == {0: False}


def test_a_frozen_server_acknowledges_nothing_until_thawed(tmp_path: Path, no_orphans: None) -> None:
    handle = start({"store": "memory"}, tmp_path)

    async def scenario() -> tuple[int, int, list[str | None]]:
        nc = await nats.connect(handle.address, **login(handle))
        conn = await stan.connect(nc, handle.client["cluster_id"], "frozen", owns_nc=True)
        outcomes: list[str | None] = []
        handle.pause()
        for i in range(5):
            await conn.publish(SUBJECT, bytes([i]) * 32, outcomes.append)
        waiting = await conn.wait_for_acks(0.5)
        handle.resume()
        after = await conn.wait_for_acks(5)
        await conn.close()
        return waiting, after, outcomes

    try:
        assert asyncio.run(scenario()) == (5, 0, [None] * 5)
    finally:
        handle.stop()


@pytest.mark.parametrize("file_sync", [True, False], ids=["file_sync", "file_nosync"])
def test_a_killed_file_store_keeps_every_acknowledged_message(
    file_sync: bool, tmp_path: Path, no_orphans: None
) -> None:
    """SIGKILL ends the process, not the machine: what was written reaches the disk through the page cache even
    without fsync (a power loss is what `file_sync` guards against, and no test here can stage one)."""
    handle = start({"store": "file", "file_sync": file_sync}, tmp_path)
    try:
        first_pid = handle.pids()[0]
        assert asyncio.run(publish(handle, 200)) == [None] * 200
        handle.kill()
        assert handle.alive() == {0: False}
        handle.nodes.restart(0)
        assert handle.alive() == {0: True} and handle.pids()[0] != first_pid
        assert asyncio.run(read_all(handle, 200)) == list(range(1, 201))  # 0 acknowledged-but-lost
        log = (tmp_path / "nats-streaming-server.log").read_text()
        assert log.count("Streaming Server is ready") == 2
    finally:
        handle.stop()


def test_a_restarted_memory_store_starts_empty(tmp_path: Path, no_orphans: None) -> None:
    """What `memory` means: the same contrast the file-store test makes, from the other side."""
    handle = start({"store": "memory"}, tmp_path)
    try:
        assert asyncio.run(publish(handle, 10)) == [None] * 10
        handle.kill()
        handle.nodes.restart(0)
        assert monitor(handle.context()["monitor_url"], "serverz")["total_msgs"] == 0
    finally:
        handle.stop()


def test_one_mebibyte_messages_fit(tmp_path: Path, no_orphans: None) -> None:
    """Seed 000's largest size: the server's max_payload is raised for it (and the config says so)."""
    handle = start({"store": "file", "file_sync": False}, tmp_path, size=1024 * 1024)
    try:
        assert "max_payload: 1052672" in handle.context()["config"]
        assert asyncio.run(publish(handle, 3, size=1024 * 1024)) == [None] * 3
    finally:
        handle.stop()


def test_a_setting_the_server_refuses_is_named(tmp_path: Path, no_orphans: None) -> None:
    with pytest.raises(BrokerError) as info:
        start({"store": "file", "streaming": {"hb_interval": "soon"}}, tmp_path)
    message = str(info.value)
    assert "exited during start (settings passed through: streaming.hb_interval='soon')" in message
    assert 'invalid duration "soon"' in message


def test_another_process_controls_the_server_from_its_state(tmp_path: Path, no_orphans: None) -> None:
    """Airflow's path: provision records the state, a later task attaches by PID to freeze, thaw and stop it."""
    handle = start({"store": "memory"}, tmp_path)
    try:
        attached = NodeBrokers.attached(handle.state(), STAN)
        assert attached.alive() == {0: True} and attached.context()["version"] == STAN_RELEASE
        assert attached.client == handle.client and attached.client["cluster_id"] == "sixnines-itest"
        assert handle.client["password"] not in json.dumps(handle.state())  # in the private file it names
        attached.pause()
        attached.resume()
        assert asyncio.run(publish(handle, 3)) == [None] * 3
        assert attached.stop() == handle.pids()
        assert handle.alive() == {0: False}
    finally:
        handle.stop()


def test_fetch_release_gives_the_verified_binary() -> None:
    path = STAN.fetch_release(STAN_RELEASE)
    assert (path.name, path.parent.name) == ("nats-streaming-server", STAN_RELEASE)
    assert reported_version(path)["version"] == STAN_RELEASE


class _MonitorFails(StanServer):
    """A real server whose start fails after its process exists: its monitoring pages cannot be read."""

    def _endpoint(self, monitor_url: str, config: str, nats_server: str) -> Any:
        raise BrokerError(f"{monitor_url} did not answer")


def test_a_start_that_fails_after_launch_leaves_no_server_running(tmp_path: Path, no_orphans: None) -> None:
    server = _MonitorFails(STAN_RELEASE, spec({}).broker, tmp_path, "failing")
    with pytest.raises(BrokerError, match="did not answer"):
        server.start()
    assert server.process is not None and not server.process.alive()  # stopped, not left detached and unrecorded
