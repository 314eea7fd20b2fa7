"""Client drivers: a small interface per system (STYLE 1; see base.py). `driver_for` picks one by the
cell's system and imports its client library only then, so a NATS run never loads librdkafka.

A cell may use several *routes* (a Kafka topic or NATS subject each): the measured one (""), the second
hop of a service chain ("hop2"), and one per background workload ("bg_<name>"). Each route gets its own
driver, built from a spec that carries that route's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MEASURED = ""
HOP2 = "hop2"


def background_route(name: str) -> str:
    return f"bg_{name}"


def final_route(cell: Any) -> str:
    """The route the measured consumers read: the second hop in a service chain, else the measured one.
    Its leaders are the ones samples are attributed to (and the ones faults hit)."""
    return HOP2 if cell.measurement == "chain" else MEASURED


@dataclass(frozen=True)
class Target:
    """Where a cell's clients go. `client` settings join every client's config (TLS, SASL, credentials: they may
    be secret, so they travel to worker processes in memory and are never recorded); `names` is the token topic,
    subject and stream names are made from ("" means the cell id; external brokers get one unique per run and
    cell); `prepared` says the routes already exist (external brokers: created by provision)."""

    address: str
    client: Mapping[str, Any] = field(default_factory=dict)
    names: str = ""
    prepared: bool = False


def route_keys(cell: Any) -> list[str]:
    """Every route a cell sends on: the measured one, a chain's second hop, one per active background."""
    keys = [MEASURED, *([HOP2] if cell.measurement == "chain" else [])]
    return keys + [background_route(name) for name, bg in cell.background.items() if bg.producers]
