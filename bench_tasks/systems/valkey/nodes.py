"""valkey-server nodes: the Redis package's `RedisServers`, naming Valkey's binary, process and version field
(Valkey reports `redis_version:7.2.4` for clients that check it, and its own release as `valkey_version`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from ..redis.nodes import RedisServers
from .release import server_binary


class ValkeyServers(RedisServers):
    KIND: ClassVar[str] = "Valkey"
    PROCESS_NAME: ClassVar[str] = "valkey-server"
    VERSION_FIELD: ClassVar[str] = "valkey_version"
    INFO_FIELDS: ClassVar[tuple[str, ...]] = (
        "valkey_version",
        "redis_version",
        "server_name",
        "redis_git_sha1",
        "redis_build_id",
        "server_mode",
        "arch_bits",
        "gcc_version",
    )
    COMMAND_SINCE: ClassVar[Mapping[str, str]] = {}  # Valkey has MODULE and DEBUG, and replicaof, from its first
    REPLICAOF_SINCE: ClassVar[str] = "0"

    @staticmethod
    def binary(version: str) -> Path:
        return server_binary(version)

    @staticmethod
    def resolve(version: str) -> str:
        from . import VALKEY

        return VALKEY.resolve_version(version)
