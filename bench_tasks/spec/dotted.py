"""Dotted paths into a cell spec (`workload.rate_per_s`, `client.producer."linger.ms"`): how axes and rules name the
setting they set."""

from __future__ import annotations

from typing import Any

from .matrix_model import BACKGROUND_PASSTHROUGH, PASSTHROUGH_MAPS


def set_path(spec: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = split_path(dotted)
    node = spec
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ValueError(f"axis {dotted!r}: {part!r} is not a mapping, so it has no key {leaf!r}")
    node[leaf] = value


def split_path(dotted: str) -> list[str]:
    """`client.producer.linger.ms` → ["client", "producer", "linger.ms"]: native option names keep their dots."""
    for prefix in PASSTHROUGH_MAPS:
        if dotted.startswith(prefix + "."):
            return [*prefix.split("."), dotted[len(prefix) + 1 :]]
    background_map = BACKGROUND_PASSTHROUGH.match(dotted)
    if background_map:
        return ["background", *background_map.groups()]
    return dotted.split(".")
