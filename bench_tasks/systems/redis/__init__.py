"""Redis as a sixnines system: pub/sub and Streams on redis-server, two releases side by side (issue 18).

This object is the system's registry entry (phase 1: not yet in `bench_tasks.systems.SYSTEMS`; phase 2 makes it a
`System` with its driver and registers it with one line). Nothing in the core names it. Importing the
package stays light: the server control and the client library load only when a cell needs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .release import VERSIONS, resolve
from .settings import RedisBroker, RedisClient, measurement_problem

if TYPE_CHECKING:
    from .nodes import RedisServers


@dataclass(frozen=True)
class RedisSystem:
    """What the core needs to know about Redis, in one place."""

    name: str = "redis"
    versions: tuple[str, ...] = VERSIONS
    broker_model: type[RedisBroker] = RedisBroker
    client_model: type[RedisClient] = RedisClient
    # Seconds a cell spends outside its schedule on a small host (servers started and stopped, workers spawned,
    # stragglers drained, the cell landed): what `sixnines cells` plans a sweep with.
    setup_estimate_s: float = 4.0

    def resolve_version(self, version: str) -> str:
        return resolve(version)

    def measurement_problem(self, broker: RedisBroker, measurement: str) -> str | None:
        return measurement_problem(broker, measurement)

    def servers(
        self, version: str, broker: RedisBroker, workdir: Path, tie_to_parent: bool = True, host: str = "127.0.0.1"
    ) -> RedisServers:
        from .nodes import RedisServers

        return RedisServers(version, broker, workdir, tie_to_parent, host)


SYSTEM = RedisSystem()

__all__ = ["SYSTEM", "VERSIONS", "RedisBroker", "RedisClient", "RedisSystem"]
