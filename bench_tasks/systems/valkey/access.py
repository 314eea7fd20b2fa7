"""Reaching a Valkey server the cell does not own: the Redis package's connection handling and stream clean-up;
the version is Valkey's own (`valkey_version` in INFO server; `redis_version` there is the Redis it answers as)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..redis.access import client_access, delete_routes, route_names, server_info
from .settings import ValkeyCell

_SERVER_KEPT = ("valkey_version", "redis_version", "server_name", "server_mode", "os", "arch_bits")


def ask_version(address: str, client: Mapping[str, Any], spec: ValkeyCell) -> dict[str, Any]:
    kept = server_info(address, client, _SERVER_KEPT)
    return {
        "version": kept.get("valkey_version", "unknown"),
        "version_source": "the server's INFO server (valkey_version)",
        "server_info": kept,
    }


__all__ = ["ask_version", "client_access", "delete_routes", "route_names"]
