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

from ..spec.background import Background
from .base import Driver

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


def driver_for(
    address: str, cell: Any, cell_id: str, route: str = MEASURED, client: Mapping[str, Any] | None = None
) -> Driver:
    """`address` is what the provisioner printed: a NATS URL or Kafka bootstrap servers; `cell_id` names the
    routes (a Target's `names`); `client` adds security settings to every client."""
    if cell.system == "nats":
        from .nats import NatsDriver

        return NatsDriver(address, cell, cell_id, route, client)
    if cell.system == "kafka":
        from .kafka import KafkaDriver

        return KafkaDriver(address, cell, cell_id, route, client)
    raise ValueError(f"no driver for system {cell.system!r}")


def background_spec(cell: Any, bg: Background) -> Any:
    """The cell as a background route's driver sees it: the background's topic layout, producer config and
    keys (Kafka); a NATS background shares the cell's mode and storage."""
    if cell.system != "kafka":
        return cell
    broker = cell.broker.model_copy(
        update={
            "partitions": bg.partitions,
            "replication_factor": bg.replication_factor,
            "min_insync_replicas": 1,
            "topic": bg.topic,
        }
    )
    client = cell.client.model_copy(
        update={"producer": bg.producer, "keys": bg.keys, "consumer_mode": "group", "start_from": "end"}
    )
    return cell.model_copy(update={"broker": broker, "client": client})


def routes(cell: Any) -> dict[str, Any]:
    """Every route a cell sends on, with the spec its driver is built from."""
    out = {MEASURED: cell}
    if cell.measurement == "chain":
        out[HOP2] = cell
    for name, bg in cell.background.items():
        if bg.producers:
            out[background_route(name)] = background_spec(cell, bg)
    return out
