"""Valkey cells: Redis's settings and checks (the same config and commands), under the system name `valkey`."""

from __future__ import annotations

from typing import ClassVar, Literal

from ..redis.settings import RedisCell


class ValkeyCell(RedisCell):
    """One Valkey cell: a Redis cell of system `valkey`. Every Valkey release has streams (it forked Redis 7.2)."""

    SYSTEM: ClassVar[str] = "valkey"
    STREAMS_SINCE: ClassVar[str | None] = None
    system: Literal["valkey"]
