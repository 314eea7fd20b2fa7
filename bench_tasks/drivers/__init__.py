"""Client drivers: a small interface per system (STYLE 1; see base.py). `driver_for` picks one by the
cell's system and imports its client library only then, so a NATS run never loads librdkafka."""

from __future__ import annotations

from typing import Any

from .base import Driver


def driver_for(address: str, cell: Any, cell_id: str) -> Driver:
    """`address` is what the provisioner printed: a NATS URL or Kafka bootstrap servers."""
    if cell.system == "nats":
        from .nats import NatsDriver

        return NatsDriver(address, cell, cell_id)
    if cell.system == "kafka":
        from .kafka import KafkaDriver

        return KafkaDriver(address, cell, cell_id)
    raise ValueError(f"no driver for system {cell.system!r}")
