"""Detached brokers started by `sixnines brokers up`: their state file, so `down` and `status` find them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..paths import cache_dir


def state_path(system: str) -> Path:
    return cache_dir() / "brokers" / f"{system}.json"


def save(system: str, state: dict[str, Any]) -> None:
    path = state_path(system)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=2))


def load(system: str) -> dict[str, Any] | None:
    path = state_path(system)
    return json.loads(path.read_text()) if path.exists() else None


def forget(system: str) -> None:
    state_path(system).unlink(missing_ok=True)
