"""What the Redis client (redis-py asyncio + hiredis) costs per message on this host, beside redis-benchmark.

One process, one connection, a real redis-server on 127.0.0.1 (Debian's 7.0 unless --version), for each payload
size: the PUBLISH and XADD rate and the client's CPU per message
- `await_each`: redis-py's `await r.publish()` one at a time (one round trip per message; also its latency),
- `pipe_each` / `pipe_batch`: the harness's ReplyPipe (open loop: written without waiting, replies read by a
  task), one write per message or one per batch, and `pipe_each` with redis-py's Connection default 5 s
  socket timeout (every write wrapped in asyncio.wait_for) to show what leaving it off saves,
- `redis_py_pipeline`: redis-py's own non-transactional pipeline of a batch,
- `native`: redis-benchmark on the same server, one connection, unpipelined and pipelined (-P batch),
then the receive side: a subscriber taking a PUBLISH flood from redis-benchmark (the harness's read loop, and
redis-py's PubSub), and a consumer-group reader draining a pre-filled stream. Server start times of every
release are measured first. Load (`uptime`) is recorded beside every section: the host is shared.

    .venv/bin/python bench/redis_client.py [--version 7.0.15] [--messages 50000]

Writes bench/results/redis_client.json.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Coroutine, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import hiredis
import redis
import redis.asyncio
from redis.asyncio.connection import parse_url

from bench_tasks.systems.redis import (
    PROTOCOL,
    REDIS,
    Command,
    RedisBroker,
    RedisClient,
    RedisServers,
    ReplyPipe,
    connect,
    publish_command,
    read_group,
    read_messages,
    subscribe,
    xadd_command,
)

RESULTS = Path(__file__).parent / "results" / "redis_client.json"
SIZES = (64, 1024)
BATCH = 100
CHANNEL, STREAM, GROUP = "bench", "bench-stream", "bench-group"
MAXLEN = 100_000
# The receive benches let the server buffer a whole flood for a slow subscriber instead of dropping it at 32 MB.
UNLIMITED_PUBSUB = {"client-output-buffer-limit": "pubsub 0 0 0"}


def host_load() -> dict[str, Any]:
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"uptime": uptime, "loadavg": [round(x, 2) for x in os.getloadavg()]}


@contextmanager
def timed(messages: int, out: dict[str, Any]):
    """Fill `out` with the wall-clock rate and this process's CPU per message over the block."""
    wall, cpu = time.perf_counter(), time.process_time()
    yield
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out.update(
        messages=messages,
        seconds=round(wall, 3),
        rate_per_s=round(messages / wall),
        client_cpu_us_per_msg=round(cpu / messages * 1e6, 2),
    )


def random_text(size: int) -> bytes:
    """Random printable bytes: redis-benchmark takes its payload as a command-line argument (no NUL bytes)."""
    return base64.b64encode(os.urandom(size))[:size]


def command_for(kind: str, payload: bytes) -> Command:
    return publish_command(CHANNEL, payload) if kind == "publish" else xadd_command(STREAM, payload, MAXLEN)


async def await_each(url: str, command: Command, messages: int) -> dict[str, Any]:
    """Closed loop through redis-py's client object: each command waits for its reply."""
    client = redis.asyncio.Redis.from_url(url, protocol=2, single_connection_client=True)
    out: dict[str, Any] = {}
    latencies_us: list[float] = []
    with timed(messages, out):
        for _ in range(messages):
            began = time.perf_counter_ns()
            await client.execute_command(*command)
            latencies_us.append((time.perf_counter_ns() - began) / 1e3)
    await client.aclose()
    ordered = sorted(latencies_us)
    out["round_trip_us"] = {p: round(ordered[int(len(ordered) * q)], 1) for p, q in (("p50", 0.5), ("p99", 0.99))}
    return out


async def pipe(url: str, command: Command, messages: int, batch: int, socket_timeout: float | None) -> dict:
    """Open loop through the harness's ReplyPipe: everything written, then wait for the last reply."""
    settings = RedisClient(connect={"socket_timeout": socket_timeout})
    conn = await connect(url, settings, "bench-pipe")
    sender = ReplyPipe(conn)
    done = asyncio.get_running_loop().create_future()
    errors: list[str] = []

    def on_reply(_reply: Any, error: str | None, last: bool = False) -> None:
        if error is not None:
            errors.append(error)
        if last:
            done.set_result(None)

    replies: list[Callable[[Any, str | None], None]] = [on_reply] * (batch - 1) + [on_reply]
    out: dict[str, Any] = {"batch": batch, "socket_timeout_s": socket_timeout}
    with timed(messages, out):
        for sent in range(0, messages, batch):
            if sent + batch >= messages:
                replies[-1] = lambda reply, error: on_reply(reply, error, last=True)
            await sender.send_many([command] * batch, replies)
        await done
    await sender.close()
    out["errors"] = len(errors)
    return out


async def redis_py_pipeline(url: str, command: Command, messages: int, batch: int) -> dict[str, Any]:
    """redis-py's own pipeline (transaction=False): `batch` commands per execute, waiting for each batch."""
    client = redis.asyncio.Redis.from_url(url, protocol=2, single_connection_client=True)
    out: dict[str, Any] = {"batch": batch}
    with timed(messages, out):
        for _ in range(0, messages, batch):
            pipeline = client.pipeline(transaction=False)
            for _ in range(batch):
                pipeline.execute_command(*command)
            await pipeline.execute()
    await client.aclose()
    return out


def tool_args(url: str) -> list[str]:
    """redis-benchmark's address and password for the server at `url` (the cell's password: every provisioned
    server asks for one; `-a` shows it in the process table while the benchmark runs, a throw-away password)."""
    where = parse_url(url)
    return ["-h", where["host"], "-p", str(where["port"]), "-a", where["password"], "--no-auth-warning"]


def native(url: str, command: Command, messages: int, pipeline: int) -> dict[str, Any]:
    """redis-benchmark (C, hiredis) with one connection on the same server: the ceiling of one client."""
    args = [a.decode() if isinstance(a, bytes) else str(a) for a in command]
    cmd = ["redis-benchmark", *tool_args(url), "-c", "1", "-n", str(messages), "-P", str(pipeline), "--csv", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    header, row = (line.replace('"', "").split(",") for line in out.strip().splitlines()[-2:])
    figures = dict(zip(header, row, strict=True))
    result: dict[str, Any] = {"pipeline": pipeline, "rate_per_s": round(float(figures["rps"]))}
    if pipeline == 1:
        result["round_trip_us"] = {"p50": float(figures["p50_latency_ms"]) * 1e3}
        result["round_trip_us"]["p99"] = float(figures["p99_latency_ms"]) * 1e3
    return result


async def send_side(url: str, kind: str, size: int, messages: int) -> dict[str, Any]:
    command = command_for(kind, random_text(size))
    runs: dict[str, Any] = {"load_before": host_load()}
    runs["await_each"] = await await_each(url, command, messages // 5)
    runs["pipe_each"] = await pipe(url, command, messages, 1, None)
    runs["pipe_each_timeout_5s"] = await pipe(url, command, messages, 1, 5.0)
    runs["pipe_batch"] = await pipe(url, command, messages, BATCH, None)
    runs["redis_py_pipeline"] = await redis_py_pipeline(url, command, messages, BATCH)
    runs["native_unpipelined"] = native(url, command, messages, 1)
    runs["native_pipelined"] = native(url, command, messages, BATCH)
    runs["load_after"] = host_load()
    return runs


def flood(url: str, command: Command, messages: int) -> subprocess.Popen:
    """redis-benchmark sending `command` `messages` times, pipelined, from its own process."""
    args = [a.decode() if isinstance(a, bytes) else str(a) for a in command]
    cmd = ["redis-benchmark", *tool_args(url), "-c", "1", "-n", str(messages), "-P", str(BATCH), "-q", *args]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def receive_rate(messages: int, start: Callable[[], None], received: Callable[[], int]) -> dict[str, Any]:
    """From `start()` (the reader begins on a backlog already waiting at the server) to the last of `messages`
    received: the reader's own rate, nothing else running, and this process's CPU per message."""
    wall, cpu = time.perf_counter(), time.process_time()
    start()
    while received() < messages:
        await asyncio.sleep(0.001)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "messages": messages,
        "rate_per_s": round(messages / wall),
        "client_cpu_us_per_msg": round(cpu / messages * 1e6, 2),
    }


class Counter:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _payload: bytes, _entry: bytes | None) -> None:
        self.count += 1


Closer = Callable[[], Coroutine[Any, Any, None]]


async def subscribed_reader(url: str, how: str, on_message: Counter) -> tuple[Coroutine[Any, Any, None], Closer]:
    """Subscribe now; return the (not yet started) read loop, the harness's or redis-py's PubSub.listen(), and
    how to close its connection (a subscriber left behind would get every later PUBLISH of the bench)."""
    if how == "harness_loop":
        conn = await connect(url, RedisClient(), "bench-sub")
        await subscribe(conn, [CHANNEL])
        return read_messages(conn, on_message), conn.disconnect
    client = redis.asyncio.Redis.from_url(url, protocol=2)
    pubsub = client.pubsub()
    await pubsub.subscribe(CHANNEL)
    await pubsub.get_message(timeout=1.0)  # the subscribe confirmation
    return _pubsub_loop(pubsub, on_message), client.aclose


async def subscriber(url: str, size: int, messages: int, how: str) -> dict[str, Any]:
    """A subscriber draining a PUBLISH flood that redis-benchmark (pipelined, another process) already sent: the
    server holds it in the subscriber's output buffer (unlimited here) until the reader starts."""
    counter, tasks = Counter(), []
    reader, close = await subscribed_reader(url, how, counter)
    flood(url, publish_command(CHANNEL, random_text(size)), messages).wait(timeout=120)
    out = await receive_rate(messages, lambda: tasks.append(asyncio.create_task(reader)), lambda: counter.count)
    tasks[0].cancel()
    await close()
    return {"reader": how, **out}


async def _pubsub_loop(pubsub: Any, on_message: Callable[[bytes, bytes | None], None]) -> None:
    async for message in pubsub.listen():
        if message["type"] == "message":
            on_message(message["data"], None)


async def group_reader(url: str, size: int, messages: int) -> dict[str, Any]:
    """A consumer-group reader (XREADGROUP COUNT 128, XACK per batch) draining a stream pre-filled natively."""
    admin = redis.Redis.from_url(url, protocol=2)
    admin.delete(STREAM)
    filler = flood(url, xadd_command(STREAM, random_text(size), None), messages)
    filler.wait(timeout=120)
    admin.xgroup_create(STREAM, GROUP, id="0")
    counter, tasks = Counter(), []
    conn = await connect(url, RedisClient(), "bench-group")
    reader = read_group(conn, STREAM, GROUP, "c1", RedisClient(), counter)
    out = await receive_rate(messages, lambda: tasks.append(asyncio.create_task(reader)), lambda: counter.count)
    tasks[0].cancel()
    await conn.disconnect()
    pending = admin.xpending(STREAM, GROUP)["pending"]
    admin.delete(STREAM)
    admin.close()
    return {**out, "read_count": RedisClient().read_count, "pending_after": pending}


def start_once(version: str, replicas: int) -> tuple[float, float]:
    """(whole start: binary verified, every node ready; the primary's process launch to its PING answering)."""
    broker = RedisBroker(replicas=replicas)
    with tempfile.TemporaryDirectory() as folder, RedisServers(version, broker, Path(folder)) as servers:
        endpoint = servers.endpoint
        return endpoint.ready_after_s, endpoint.nodes[0].started_after_s


def start_times(runs: int) -> dict[str, Any]:
    """Seconds from start() to ready, per release: a single server, and a primary with one replica."""
    result: dict[str, Any] = {"load_before": host_load()}
    for version in REDIS.versions:
        for replicas in (0, 1):
            whole, primary = zip(*(start_once(version, replicas) for _ in range(runs)), strict=True)
            result[f"{version}_replicas_{replicas}"] = {
                "ready_median_s": round(statistics.median(whole), 3),
                "ready_max_s": max(whole),
                "primary_process_to_ping_median_s": round(statistics.median(primary), 3),
                "runs": runs,
            }
    result["load_after"] = host_load()
    return result


async def measure(url: str, sizes: Sequence[int], messages: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for size in sizes:
        result[f"publish_{size}B"] = await send_side(url, "publish", size, messages)
        result[f"xadd_{size}B"] = await send_side(url, "xadd", size, messages)
        result[f"receive_{size}B"] = {
            "load_before": host_load(),
            "subscriber_harness_loop": await subscriber(url, size, messages, "harness_loop"),
            "subscriber_redis_py_pubsub": await subscriber(url, size, messages, "redis_py_pubsub"),
            "group_reader": await group_reader(url, size, messages),
            "load_after": host_load(),
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="latest", help="a Redis release ('sixnines brokers fetch redis --list')")
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--start-runs", type=int, default=5)
    args = parser.parse_args()
    if shutil.which("redis-benchmark") is None:
        raise SystemExit("redis-benchmark is missing: run `make tools` (Debian's redis-tools)")
    result: dict[str, Any] = {
        "schema_version": 1,
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()},
        "client": {"redis_py": redis.__version__, "hiredis": hiredis.__version__, "protocol": PROTOCOL},
        "server_start": start_times(args.start_runs),
    }
    broker = RedisBroker(server=UNLIMITED_PUBSUB)
    with tempfile.TemporaryDirectory() as folder, RedisServers(args.version, broker, Path(folder)) as servers:
        result["server"] = {"version": servers.endpoint.version, "config": servers.endpoint.nodes[0].config}
        result["runs"] = asyncio.run(measure(servers.login_url(), SIZES, args.messages))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
