"""What does the streaming protocol cost the harness per message? (issue 23's client benchmark)

One real nats-streaming-server (memory store, the newest release) on 127.0.0.1, and in one run, side by side:
- codec: µs of CPU to build a PubMsg, read a MsgProto, build an Ack, read a PubAck, by message size;
- publish: CPU per message of this client's `publish` (PubMsg, guid, PubAck bookkeeping, the PubAck read back)
  against a plain nats-py publish of the same bytes on the same server; the difference is the protocol's cost;
- receive: CPU per message of a subscription (MsgProto read, callback, Ack sent) against a plain nats-py
  subscription fed by another process;
- native: stan.go's own `stan-bench` (1 publisher with async acks, 1 subscriber) against the same server, and
  this client's throughput in the same shape, so the harness's ceiling is stated beside the Go client's.

Writes bench/results/stan_client.json with the host's load (`uptime`) before and after.

    .venv/bin/python bench/stan_client.py [--messages 50000] [--sizes 256 1024] [--repeats 3] [--no-native]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from importlib.metadata import version
from pathlib import Path
from typing import Any

import nats

from bench_tasks import cache_dir, go_binary, go_install, login_url, without_userinfo
from bench_tasks.systems.stan import (
    STAN,
    Ack,
    MsgProto,
    PubAck,
    PubMsg,
    StanBroker,
    SubscriptionOptions,
    start_server,
)
from bench_tasks.systems.stan import connect as stan_connect

RESULTS = Path(__file__).parent / "results" / "stan_client.json"
STAN_GO = "github.com/nats-io/stan.go"
STAN_GO_VERSION = "v0.10.4"  # the last stan.go release, the client the server's own tests use
CODEC_SIZES = (256, 1024, 5 * 1024, 1024 * 1024)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def codec_us(size: int) -> dict[str, float]:
    """µs of one encode or decode (best of 5 repeats), as the client does it per message."""
    data = os.urandom(size)
    guid, conn_id = "B9kPqz3mS1zT0mXvRrGa5d", b"conn-id-22-bytes-long!"
    raw_msg = MsgProto(sequence=123456, subject="sixnines.x", data=data, timestamp=time.time_ns()).SerializeToString()
    raw_ack = PubAck(guid=guid).SerializeToString()
    cases = {
        "pubmsg_encode": lambda: PubMsg(
            clientID="p-1", guid=guid, subject="sixnines.x", data=data, connID=conn_id
        ).SerializeToString(),
        "msgproto_decode": lambda: MsgProto.FromString(raw_msg),
        "ack_encode": lambda: Ack(subject="sixnines.x", sequence=123456).SerializeToString(),
        "puback_decode": lambda: PubAck.FromString(raw_ack),
    }
    number = 200 if size >= 1024 * 1024 else 20000
    return {
        name: round(min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6, 3) for name, fn in cases.items()
    }


def per_message(cpu_s: float, wall_s: float, count: int) -> dict[str, float]:
    return {"cpu_us": round(cpu_s / count * 1e6, 2), "wall_s": round(wall_s, 3), "msgs_per_s": round(count / wall_s)}


async def publish_core(url: str, payload: bytes, count: int) -> dict[str, float]:
    nc = await nats.connect(url, pending_size=256 * 1024 * 1024)
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        await nc.publish("sixnines.core", payload)
    await nc.flush()
    result = per_message(time.process_time() - cpu, time.perf_counter() - wall, count)
    await nc.close()
    return result


async def publish_stan(url: str, cluster_id: str, payload: bytes, count: int) -> dict[str, float]:
    """Every publish acknowledged before the clock stops (seed 000's rule for its throughput part)."""
    nc = await nats.connect(url, pending_size=256 * 1024 * 1024)
    conn = await stan_connect(nc, cluster_id, "bench-pub", owns_nc=True, max_pub_acks_in_flight=count)
    failed: list[str] = []

    def on_ack(error: str | None) -> None:
        if error is not None:
            failed.append(error)

    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(count):
        await conn.publish("sixnines.stan", payload, on_ack)
    left = await conn.wait_for_acks(60)
    result = per_message(time.process_time() - cpu, time.perf_counter() - wall, count)
    await conn.close()
    if left or failed:
        raise SystemExit(f"publish: {left} PubAcks missing, {len(failed)} failed ({failed[:1]})")
    return result


class Arrivals:
    """Counts received messages and times them from the first to the last (start-up is not counted)."""

    def __init__(self, expected: int):
        self.expected = expected
        self.got = 0
        self.first: tuple[float, float] = (0.0, 0.0)
        self.result: dict[str, float] = {}
        self.done = asyncio.Event()

    def __call__(self, _msg: Any) -> None:
        self.got += 1
        if self.got == 1:
            self.first = (time.process_time(), time.perf_counter())
        elif self.got == self.expected:
            cpu, wall = self.first
            self.result = per_message(time.process_time() - cpu, time.perf_counter() - wall, self.expected - 1)
            self.done.set()


async def receive_core(url: str, payload_size: int, count: int) -> dict[str, float]:
    """A plain subscription fed by a publisher in another process (so only receiving is counted here)."""
    nc = await nats.connect(url)
    arrivals = Arrivals(count)

    async def on_msg(msg: Any) -> None:
        arrivals(msg)

    await nc.subscribe("sixnines.core-rx", cb=on_msg, pending_msgs_limit=0, pending_bytes_limit=0)
    await nc.flush()
    script = (
        "import asyncio, nats, os\n"
        "async def main():\n"
        f"    nc = await nats.connect({url!r}, pending_size=256 * 1024 * 1024)\n"
        f"    data = os.urandom({payload_size})\n"
        f"    for _ in range({count}):\n"
        "        await nc.publish('sixnines.core-rx', data)\n"
        "    await nc.flush()\n"
        "    await nc.close()\n"
        "asyncio.run(main())\n"
    )
    publisher = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    await asyncio.wait_for(arrivals.done.wait(), 120)
    await publisher.wait()
    await nc.close()
    return arrivals.result


async def receive_stan(url: str, cluster_id: str, payload: bytes, count: int) -> dict[str, float]:
    """A subscription reading `count` stored messages from the first (published beforehand, not counted)."""
    nc = await nats.connect(url, pending_size=256 * 1024 * 1024)
    conn = await stan_connect(nc, cluster_id, "bench-rx", owns_nc=True, max_pub_acks_in_flight=count)
    for _ in range(count):
        await conn.publish("sixnines.stan-rx", payload, lambda _e: None)
    await conn.wait_for_acks(60)
    arrivals = Arrivals(count)
    opts = SubscriptionOptions(start_position="first", max_in_flight=16384)
    await conn.subscribe("sixnines.stan-rx", arrivals, opts)
    await asyncio.wait_for(arrivals.done.wait(), 120)
    await conn.close()
    return arrivals.result


def median_of(rounds: list[Any]) -> Any:
    """The median of every number across rounds of the same shape (a noisy shared host: one round is not enough)."""
    first = rounds[0]
    if isinstance(first, dict):
        return {key: median_of([r[key] for r in rounds]) for key in first}
    return statistics.median(rounds)


def stan_bench_binary() -> Path:
    target = cache_dir() / "stan" / "tools" / f"stan-bench-{STAN_GO_VERSION}" / "stan-bench"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        go = go_binary("building stan-bench")
        print(f"building stan-bench {STAN_GO_VERSION} (go install)", file=sys.stderr)
        go_install(go, f"{STAN_GO}/examples/stan-bench@{STAN_GO_VERSION}", target, 900)
    return target


def native(url: str, cluster_id: str, size: int, count: int) -> dict[str, Any]:
    """stan.go's stan-bench: 1 async publisher (every PubAck awaited), 1 subscriber, the same server."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "bench.csv"
        cmd = [str(stan_bench_binary()), "-s", url, "-c", cluster_id, "-id", f"native{size}", "-np", "1", "-ns", "1"]
        cmd += ["-n", str(count), "-ms", str(size), "-csv", str(report), f"sixnines.native{size}"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise SystemExit(f"stan-bench failed: {done.stderr.strip()[-500:]}")
        rows = list(csv.DictReader(report.open()))
    return {"command": without_userinfo(" ".join(cmd[1:])), "report": done.stdout.strip().splitlines(), "csv": rows}


async def client_side(url: str, cluster_id: str, sizes: list[int], count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in sizes:
        payload = os.urandom(size)
        pub_core, pub_stan = (
            await publish_core(url, payload, count),
            await publish_stan(url, cluster_id, payload, count),
        )
        rx_core, rx_stan = await receive_core(url, size, count), await receive_stan(url, cluster_id, payload, count)
        out[str(size)] = {
            "publish": {"core_nats": pub_core, "stan": pub_stan},
            "receive": {"core_nats": rx_core, "stan": rx_stan},
            "overhead_cpu_us": {
                "publish": round(pub_stan["cpu_us"] - pub_core["cpu_us"], 2),
                "receive": round(rx_stan["cpu_us"] - rx_core["cpu_us"], 2),
            },
        }
        print(f"{size} B: {json.dumps(out[str(size)])}", file=sys.stderr)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--repeats", type=int, default=3, help="client rounds; the median of each figure is kept")
    parser.add_argument("--no-native", action="store_true", help="skip stan.go's stan-bench")
    args = parser.parse_args()
    result: dict[str, Any] = {"schema_version": 1, "uptime_before": uptime(), "messages": args.messages}
    result["codec_us"] = {str(size): codec_us(size) for size in CODEC_SIZES}
    with tempfile.TemporaryDirectory() as workdir:
        started = start_server(
            STAN.resolve_version("latest"), StanBroker(store="memory"), Path(workdir), "stan-client-bench"
        )
        try:
            cluster_id = started.client["cluster_id"]
            url = login_url(started.address, started.client["user"], started.client["password"])  # never recorded
            result["server"] = {k: started.context[k] for k in ("version", "nats_server", "go", "store")}
            rounds = [asyncio.run(client_side(url, cluster_id, args.sizes, args.messages)) for _ in range(args.repeats)]
            result["client_rounds"] = rounds
            result["client"] = median_of(rounds)
            if not args.no_native:
                result["native"] = {str(s): native(url, cluster_id, s, args.messages) for s in args.sizes}
        finally:
            started.nodes.stop()
    result["uptime_after"] = uptime()
    result["host"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "nats_py": version("nats-py")}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
