"""Starting a Valkey cell's servers: the Redis package's provisioning with `ValkeyServers`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from ..redis import provision as redis_provision
from .settings import ValkeyCell


def start_brokers(spec: ValkeyCell, names: str, workdir: Path, tie_to_parent: bool, host: str) -> StartedBrokers:
    from .nodes import ValkeyServers

    return redis_provision.start_brokers(spec, names, workdir, tie_to_parent, host, ValkeyServers)


def describe_running(state: Mapping[str, Any]) -> list[str]:
    return redis_provision.describe_running(state, "Valkey")
