"""Where a RabbitMQ message's time goes in sixnines' Python client path: pika on the harness's precise asyncio loop.

One fresh node, a transient classic queue, 1 KiB at 1000/s with confirms, one producer process and one consumer
process (as a sixnines e2e cell runs them). Each message is stamped at four points on CLOCK_MONOTONIC:
- `call`: just before `basic_publish` (where sixnines stamps `sent_ns`);
- `wire`: when pika's `sock.send` that carried the message returned (pika writes when the loop next turns);
- `recv`: when the consumer's `sock.recv` that brought the message's last bytes returned;
- `handed`: when pika handed the delivery to the callback (where sixnines stamps `received_ns`).
and the confirm at `ack_recv` (its bytes read) and `ack_handed` (pika's confirm callback). So e2e from sent splits
into producer (call→wire), wire to wire (wire→recv: the kernel, the node, the consumer's wake-up) and consumer
(recv→handed); `wire_to_wire` is what a client with no cost of its own would see, the floor any client has here.

The stamps come from wrapping pika's two socket calls (`_sigint_safe_send`/`_recv`) in this process only; the
driver is not changed by it. `--flush-now` makes the producer write each batch at once instead of on the loop's
next turn, to measure what that turn costs.

    .venv/bin/python bench/rabbitmq_latency_parts.py [--seconds 10] [--flush-now]

Writes bench/results/rabbitmq_latency_parts.json with the host load before and after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_tasks import run_precise, tighten_timer_slack
from bench_tasks.systems.rabbitmq import RabbitCluster, RabbitmqBroker, amqp_urls

RESULTS = Path(__file__).parent / "results" / "rabbitmq_latency_parts.json"
SCHEMA_VERSION = 1  # 1: first version
QUEUE = "latency-parts"
RATE_PER_S, SIZE_BYTES, WARMUP_S = 1000, 1024, 2
_HEAD = struct.Struct("<q")


def host_load() -> dict[str, Any]:
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"loadavg_1m": os.getloadavg()[0], "uptime": uptime}


class _Wire:
    """The time pika's last send and recv returned, read by the callbacks that follow them."""

    sent_ns = 0
    recv_ns = 0

    @classmethod
    def install(cls) -> None:
        from pika.adapters.utils import io_services_utils as io

        send, recv = io._AsyncTransportBase._sigint_safe_send, io._AsyncTransportBase._sigint_safe_recv

        def timed_send(sock: Any, data: bytes) -> int:
            n = send(sock, data)
            cls.sent_ns = time.monotonic_ns()
            _on_wire()
            return n

        def timed_recv(sock: Any, max_bytes: int) -> bytes:
            data = recv(sock, max_bytes)
            cls.recv_ns = time.monotonic_ns()
            return data

        io._AsyncTransportBase._sigint_safe_send = staticmethod(timed_send)
        io._AsyncTransportBase._sigint_safe_recv = staticmethod(timed_recv)


_unwritten: list[int] = []  # the producer's seqs published but not yet sent
_wire_ns: dict[int, int] = {}


def _on_wire() -> None:
    for seq in _unwritten:
        _wire_ns[seq] = _Wire.sent_ns
    _unwritten.clear()


async def _open(url: str) -> tuple[Any, Any]:
    from bench_tasks.systems.rabbitmq import call as _call
    from bench_tasks.systems.rabbitmq import connect

    conn = await connect(url, "parts", {})
    channel = await _call(lambda cb: conn.channel(on_open_callback=cb))
    return conn, channel


def consumer(url: str, count: int, out: Any, ready: Any) -> None:
    tighten_timer_slack()
    _Wire.install()
    out.put(run_precise(_consume(url, count, ready)))


async def _consume(url: str, count: int, ready: Any) -> dict[int, tuple[int, int]]:
    from bench_tasks.systems.rabbitmq import call as _call

    conn, channel = await _open(url)
    got: dict[int, tuple[int, int]] = {}
    done = asyncio.get_running_loop().create_future()

    def deliver(_ch: Any, _method: Any, _props: Any, body: bytes) -> None:
        got[_HEAD.unpack_from(body)[0]] = (_Wire.recv_ns, time.monotonic_ns())
        if len(got) >= count and not done.done():
            done.set_result(None)

    await _call(lambda cb: channel.basic_consume(QUEUE, deliver, auto_ack=True, callback=cb))
    ready.set()
    await asyncio.wait_for(done, count / RATE_PER_S + 60)
    conn.close()
    return got


def producer(url: str, count: int, flush_now: bool, coalesce: bool, out: Any) -> None:
    tighten_timer_slack()
    _Wire.install()
    out.put(run_precise(_produce(url, count, flush_now, coalesce)))


async def _produce(url: str, count: int, flush_now: bool, coalesce: bool) -> dict[str, Any]:
    from bench_tasks.systems.rabbitmq import call as _call

    conn, channel = await _open(url)
    calls = np.zeros(count, dtype=np.int64)
    returned = np.zeros(count, dtype=np.int64)
    acks: dict[int, tuple[int, int]] = {}

    low = [1]  # every tag below this is confirmed

    def confirmed(frame: Any) -> None:
        """A Basic.Ack for one tag, or (`multiple`) for every tag up to it: tag = seq + 1."""
        tag, stamp = frame.method.delivery_tag, (_Wire.recv_ns, time.monotonic_ns())
        for each in range(low[0], tag + 1) if frame.method.multiple else (tag,):
            acks.setdefault(each, stamp)
        while low[0] in acks:
            low[0] += 1

    await _call(lambda cb: channel.confirm_delivery(confirmed, callback=cb))
    pad = bytes(SIZE_BYTES - _HEAD.size)
    t0 = time.monotonic_ns() + 10_000_000
    transport = conn._transport
    for seq in range(count):
        due = t0 + seq * 1_000_000_000 // RATE_PER_S
        now = time.monotonic_ns()
        await asyncio.sleep(max(0, due - now) * 1e-9)
        calls[seq] = time.monotonic_ns()
        channel.basic_publish("", QUEUE, _HEAD.pack(seq) + pad)
        returned[seq] = time.monotonic_ns()
        _unwritten.append(seq)
        if coalesce and len(transport._tx_buffers) > 1:
            joined = b"".join(transport._tx_buffers)
            transport._tx_buffers.clear()
            transport._tx_buffers.append(joined)
        if flush_now and transport.get_write_buffer_size():
            transport._on_socket_writable()
    deadline = time.monotonic() + 30
    while len(acks) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    conn.close()
    return {"call": calls.tolist(), "returned": returned.tolist(), "wire": dict(_wire_ns), "acks": acks}


def _percentiles(values: np.ndarray) -> dict[str, float]:
    us = values / 1e3
    return {p: round(float(np.percentile(us, float(p), method="inverted_cdf")), 1) for p in ("50", "90", "99")} | {
        "max": round(float(us.max()), 1),
        "count": int(us.size),
    }


def parts(made: dict[str, Any], got: dict[int, tuple[int, int]], skip: int) -> dict[str, Any]:
    """Per-part percentiles (µs) over the messages after the warm-up."""
    seqs = [s for s in range(skip, len(made["call"])) if s in got and s in made["wire"] and s + 1 in made["acks"]]
    idx = np.array(seqs)
    call = np.array(made["call"])[idx]
    wire = np.array([made["wire"][s] for s in seqs])
    recv, handed = (np.array([got[s][i] for s in seqs]) for i in (0, 1))
    ack_recv, ack_handed = (np.array([made["acks"][s + 1][i] for s in seqs]) for i in (0, 1))
    return {
        "e2e_from_call": _percentiles(handed - call),
        "producer_publish_call": _percentiles(np.array(made["returned"])[idx] - call),
        "producer_call_to_wire": _percentiles(wire - call),
        "wire_to_wire": _percentiles(recv - wire),
        "consumer_recv_to_handed": _percentiles(handed - recv),
        "confirm_from_call": _percentiles(ack_handed - call),
        "confirm_wire_to_wire": _percentiles(ack_recv - wire),
        "confirm_recv_to_handed": _percentiles(ack_handed - ack_recv),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--flush-now", action="store_true", help="the producer writes each publish at once")
    parser.add_argument("--coalesce", action="store_true", help="a publish's three frames leave in one send")
    args = parser.parse_args()
    count = int((WARMUP_S + args.seconds) * RATE_PER_S)
    ctx = mp.get_context("fork")
    before = host_load()
    with tempfile.TemporaryDirectory() as workdir, RabbitCluster("latest", RabbitmqBroker(), workdir) as cluster:
        assert cluster.endpoint is not None
        url = cluster.user.url(amqp_urls(cluster.endpoint.url)[0])
        run_precise(_declare(url))
        got_q, made_q, ready = ctx.Queue(), ctx.Queue(), ctx.Event()
        cons = ctx.Process(target=consumer, args=(url, count, got_q, ready))
        cons.start()
        ready.wait(30)
        prod = ctx.Process(target=producer, args=(url, count, args.flush_now, args.coalesce, made_q))
        prod.start()
        made, got = made_q.get(timeout=count / RATE_PER_S + 90), got_q.get(timeout=120)
        prod.join(30)
        cons.join(30)
        version = cluster.endpoint.version
    result = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "rabbitmq_latency_parts",
        "command": " ".join(sys.argv),
        "broker": version,
        "shape": "transient classic queue, default exchange, 1 KiB @ 1000/s, confirms, auto-ack consumer",
        "flush_now": args.flush_now,
        "coalesce": args.coalesce,
        "parts_us": parts(made, got, WARMUP_S * RATE_PER_S),
        "host_load": {"before": before, "after": host_load()},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    variant = "".join(f"-{name}" for name, on in (("flush-now", args.flush_now), ("coalesce", args.coalesce)) if on)
    out = RESULTS.with_name(f"{RESULTS.stem}{variant}.json")
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: {p: v[p] for p in ("50", "99")} for k, v in result["parts_us"].items()}, indent=1))
    print(f"load {before['uptime']} -> {result['host_load']['after']['uptime']}")
    return 0


async def _declare(url: str) -> None:
    from bench_tasks.systems.rabbitmq import call as _call

    conn, channel = await _open(url)
    await _call(lambda cb: channel.queue_declare(QUEUE, durable=False, callback=cb))
    conn.close()


if __name__ == "__main__":
    sys.exit(main())
