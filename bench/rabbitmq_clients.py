"""Which Python AMQP 0-9-1 client should sixnines drive RabbitMQ with? Each candidate's per-message cost on this host.

One fresh RabbitMQ node (bench_tasks.systems.rabbitmq, a transient classic queue, the default exchange, 1 KiB bodies);
one client process; for each candidate, each case is run `--repeats` times and timed with the wall clock and the
process's own CPU clock (the broker runs in its own process, so the CPU time is the client's alone):
- `publish`: N publishes without confirms, as fast as the client takes them, until the broker holds all N;
- `publish_confirms`: N publishes pipelined with publisher confirms on, until the last confirm;
- `consume_auto`: N messages already in the queue, received with automatic acknowledgement;
- `consume_manual`: the same with manual acks, one per message, prefetch 500.
The candidates are aio-pika (on aiormq), aiormq, and pika with its asyncio connection adapter (all on the
harness's asyncio loop), plus pika's BlockingConnection for reference (a thread per connection; with confirms its
publish waits for each confirm, so it runs closed loop and only `--sync-messages` are sent).

Candidates are imported where installed; run it with them on the path, e.g.
    uv pip install --target /tmp/rmqclients --no-deps aio-pika==10.2.1 aiormq==7.2.4 pamqp==4.0.1 pika==1.4.4
    PYTHONPATH=/tmp/rmqclients .venv/bin/python bench/rabbitmq_clients.py
Writes bench/results/rabbitmq_clients.json with the host load (`uptime`) before and after every candidate.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from bench_tasks.systems.rabbitmq import RabbitCluster, RabbitmqBroker, amqp_urls

RESULTS = Path(__file__).parent / "results" / "rabbitmq_clients.json"
SCHEMA_VERSION = 1  # 1: first version
QUEUE = "clients-bench"
BODY = bytes(1024)
CASES = ("publish", "publish_confirms", "consume_auto", "consume_manual")


def host_load() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"loadavg_1m": one, "loadavg_5m": five, "loadavg_15m": fifteen, "uptime": uptime, "cpus": os.cpu_count()}


# --- aio-pika -------------------------------------------------------------------------------------------------


class AioPika:
    package = "aio-pika"

    async def open(self, url: str, confirms: bool) -> None:
        aio_pika = importlib.import_module("aio_pika")
        self.mod = aio_pika
        self.conn = await aio_pika.connect(url)
        self.channel = await self.conn.channel(publisher_confirms=confirms)
        await self.channel.declare_queue(QUEUE, durable=False)

    async def publish(self, count: int, confirms: bool) -> None:
        exchange, message = self.channel.default_exchange, self.mod.Message
        if confirms:
            await asyncio.gather(*(exchange.publish(message(BODY), routing_key=QUEUE) for _ in range(count)))
        else:
            for _ in range(count):
                await exchange.publish(message(BODY), routing_key=QUEUE)

    async def depth(self) -> int:
        queue = await self.channel.declare_queue(QUEUE, passive=True)
        return queue.declaration_result.message_count

    async def purge(self) -> None:
        await (await self.channel.declare_queue(QUEUE, passive=True)).purge()

    async def consume(self, count: int, manual: bool) -> None:
        done, seen = asyncio.get_running_loop().create_future(), [0]
        if manual:
            await self.channel.set_qos(prefetch_count=500)

        async def on_message(message: Any) -> None:
            if manual:
                await message.ack()
            seen[0] += 1
            if seen[0] == count:
                done.set_result(None)

        queue = await self.channel.declare_queue(QUEUE, passive=True)
        tag = await queue.consume(on_message, no_ack=not manual)
        await done
        await queue.cancel(tag)

    async def close(self) -> None:
        await self.conn.close()


# --- aiormq ---------------------------------------------------------------------------------------------------


class Aiormq:
    package = "aiormq"

    async def open(self, url: str, confirms: bool) -> None:
        aiormq = importlib.import_module("aiormq")
        self.conn = await aiormq.connect(url)
        self.channel = await self.conn.channel(publisher_confirms=confirms)
        await self.channel.queue_declare(QUEUE, durable=False)

    async def publish(self, count: int, confirms: bool) -> None:
        if confirms:
            await asyncio.gather(*(self.channel.basic_publish(BODY, routing_key=QUEUE) for _ in range(count)))
        else:
            for _ in range(count):
                await self.channel.basic_publish(BODY, routing_key=QUEUE)

    async def depth(self) -> int:
        return (await self.channel.queue_declare(QUEUE, passive=True)).message_count

    async def purge(self) -> None:
        await self.channel.queue_purge(QUEUE)

    async def consume(self, count: int, manual: bool) -> None:
        done, seen = asyncio.get_running_loop().create_future(), [0]
        if manual:
            await self.channel.basic_qos(prefetch_count=500)

        async def on_message(message: Any) -> None:
            if manual:
                await message.channel.basic_ack(message.delivery.delivery_tag)
            seen[0] += 1
            if seen[0] == count:
                done.set_result(None)

        ok = await self.channel.basic_consume(QUEUE, on_message, no_ack=not manual)
        await done
        await self.channel.basic_cancel(ok.consumer_tag)

    async def close(self) -> None:
        await self.conn.close()


# --- pika, asyncio connection adapter ---------------------------------------------------------------------------


class PikaAsyncio:
    """Callbacks on the asyncio loop: a publish is a plain call that appends frames to the connection's buffer;
    confirms arrive as Basic.Ack frames, one callback per frame (`multiple` covers many deliveries)."""

    package = "pika"

    async def open(self, url: str, confirms: bool) -> None:
        pika = importlib.import_module("pika")
        adapter = importlib.import_module("pika.adapters.asyncio_connection")
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[Any] = loop.create_future()
        self.conn = adapter.AsyncioConnection(
            pika.URLParameters(url),
            on_open_callback=opened.set_result,
            on_open_error_callback=lambda _c, exc: opened.set_exception(exc),
            custom_ioloop=loop,
        )
        await opened
        self.channel = await self._call(lambda cb: self.conn.channel(on_open_callback=cb))
        self.confirmed = 0
        self.confirm_target = 0
        self.confirm_done: asyncio.Future[None] | None = None
        if confirms:
            await self._call(lambda cb: self.channel.confirm_delivery(self._on_confirm, callback=cb))
        await self._call(lambda cb: self.channel.queue_declare(QUEUE, durable=False, callback=cb))

    async def _call(self, start: Callable[[Callable[[Any], None]], Any]) -> Any:
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        start(lambda result: done.done() or done.set_result(result))
        return await done

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        self.confirmed = method.delivery_tag if method.multiple else self.confirmed + 1
        if self.confirm_done and self.confirmed >= self.confirm_target and not self.confirm_done.done():
            self.confirm_done.set_result(None)

    async def publish(self, count: int, confirms: bool) -> None:
        if confirms:
            self.confirm_target += count
            self.confirm_done = asyncio.get_running_loop().create_future()
        for _ in range(count):
            self.channel.basic_publish("", QUEUE, BODY)
        await asyncio.sleep(0)
        if confirms:
            await self.confirm_done

    async def depth(self) -> int:
        frame = await self._call(lambda cb: self.channel.queue_declare(QUEUE, passive=True, callback=cb))
        return frame.method.message_count

    async def purge(self) -> None:
        await self._call(lambda cb: self.channel.queue_purge(QUEUE, callback=cb))

    async def consume(self, count: int, manual: bool) -> None:
        done, seen = asyncio.get_running_loop().create_future(), [0]
        if manual:
            await self._call(lambda cb: self.channel.basic_qos(prefetch_count=500, callback=cb))

        def on_message(channel: Any, method: Any, _properties: Any, _body: bytes) -> None:
            if manual:
                channel.basic_ack(method.delivery_tag)
            seen[0] += 1
            if seen[0] == count:
                done.set_result(None)

        tag = self.channel.basic_consume(QUEUE, on_message, auto_ack=not manual)
        await done
        await self._call(lambda cb: self.channel.basic_cancel(tag, callback=cb))

    async def close(self) -> None:
        closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.conn.add_on_close_callback(lambda *_: closed.done() or closed.set_result(None))
        self.conn.close()
        await closed


# --- pika, blocking connection (reference: not an asyncio client) -------------------------------------------------


class PikaBlocking:
    package = "pika"

    async def open(self, url: str, confirms: bool) -> None:
        pika = importlib.import_module("pika")
        self.conn = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.conn.channel()
        if confirms:
            self.channel.confirm_delivery()
        self.channel.queue_declare(QUEUE, durable=False)

    async def publish(self, count: int, confirms: bool) -> None:
        for _ in range(count):  # with confirms each call waits for its confirm: closed loop
            self.channel.basic_publish("", QUEUE, BODY)

    async def depth(self) -> int:
        return self.channel.queue_declare(QUEUE, passive=True).method.message_count

    async def purge(self) -> None:
        self.channel.queue_purge(QUEUE)

    async def consume(self, count: int, manual: bool) -> None:
        seen = [0]
        if manual:
            self.channel.basic_qos(prefetch_count=500)

        def on_message(channel: Any, method: Any, _properties: Any, _body: bytes) -> None:
            if manual:
                channel.basic_ack(method.delivery_tag)
            seen[0] += 1

        tag = self.channel.basic_consume(QUEUE, on_message, auto_ack=not manual)
        while seen[0] < count:
            self.conn.process_data_events(time_limit=0.05)
        self.channel.basic_cancel(tag)

    async def close(self) -> None:
        self.conn.close()


CANDIDATES: dict[str, type] = {
    "aio-pika": AioPika,
    "aiormq": Aiormq,
    "pika-asyncio": PikaAsyncio,
    "pika-blocking": PikaBlocking,
}


async def timed(action: Callable[[], Awaitable[None]], count: int) -> dict[str, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await action()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"rate_per_s": count / wall, "cpu_us_per_msg": cpu / count * 1e6, "wall_s": wall}


async def until_depth(client: Any, count: int) -> None:
    while await client.depth() < count:
        await asyncio.sleep(0.001)


async def run_case(client_type: type, url: str, case: str, count: int) -> dict[str, float]:
    """One case on a fresh connection and an empty queue."""
    confirms = case == "publish_confirms"
    client = client_type()
    await client.open(url, confirms)
    try:
        await client.purge()
        if case.startswith("publish"):

            async def publish() -> None:
                await client.publish(count, confirms)
                await until_depth(client, count)

            return await timed(publish, count)
        await client.publish(count, False)
        await until_depth(client, count)
        return await timed(lambda: client.consume(count, case == "consume_manual"), count)
    finally:
        await client.close()


def measure(name: str, url: str, args: argparse.Namespace) -> dict[str, Any]:
    client_type = CANDIDATES[name]
    entry: dict[str, Any] = {"package": client_type.package, "version": metadata.version(client_type.package)}
    entry["load_before"] = host_load()
    for case in CASES:
        count = args.sync_messages if (name == "pika-blocking" and case == "publish_confirms") else args.messages
        runs = [asyncio.run(run_case(client_type, url, case, count)) for _ in range(args.repeats)]
        entry[case] = {
            "messages": count,
            "rate_per_s": round(statistics.median(r["rate_per_s"] for r in runs)),
            "cpu_us_per_msg": round(statistics.median(r["cpu_us_per_msg"] for r in runs), 2),
            "runs": [{k: round(v, 3) for k, v in r.items()} for r in runs],
        }
        print(f"{name:14} {case:17} {entry[case]['rate_per_s']:>8} msg/s  {entry[case]['cpu_us_per_msg']:>7} µs/msg")
    entry["load_after"] = host_load()
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--sync-messages", type=int, default=2_000, help="pika-blocking with confirms (closed loop)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=sorted(CANDIDATES), help="candidates to run (default: all)")
    args = parser.parse_args()
    available = [n for n in (args.only or CANDIDATES) if _importable(CANDIDATES[n].package)]
    missing = sorted(set(args.only or CANDIDATES) - set(available))
    if missing:
        print(f"not installed, skipped: {missing}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as workdir, RabbitCluster("latest", RabbitmqBroker(), workdir) as cluster:
        assert cluster.endpoint is not None
        url = cluster.user.url(amqp_urls(cluster.endpoint.url)[0])
        print(f"RabbitMQ {cluster.endpoint.version} (Erlang {cluster.endpoint.erlang}), load {host_load()['uptime']}")
        results = {name: measure(name, url, args) for name in available}
        broker = {"version": cluster.endpoint.version, "erlang": cluster.endpoint.erlang}
    document = {
        "schema_version": SCHEMA_VERSION,
        "python": platform.python_version(),
        "broker": broker,
        "body_bytes": len(BODY),
        "queue": "classic, transient, default exchange, 1 node on loopback",
        "clients": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


def _importable(package: str) -> bool:
    try:
        metadata.version(package)
        return True
    except metadata.PackageNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
