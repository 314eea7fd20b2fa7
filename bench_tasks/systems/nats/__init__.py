"""NATS (core and JetStream): the real nats-server, nats-py clients."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..base import System
from .settings import NatsCell


class Nats(System):
    name: ClassVar[str] = "nats"
    cell_model = NatsCell
    setup_estimate_s = 5.0
    calibration_measurement = "rtt"  # core request/reply: a synchronous connection's service time hides a stall
    calibration_broker: ClassVar[Mapping[str, Any]] = {"mode": "core"}

    def label(self, spec: Any) -> str:
        setup = f"nats/{spec.broker.mode}"
        if spec.broker.servers > 1 or spec.broker.replicas > 1:  # single-server labels stay as they were
            setup += f" n{spec.broker.servers} R{spec.broker.replicas}"
        return setup

    def group_tag(self, spec: Any) -> str:
        return spec.broker.mode

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        return broker.get("mode", "core") == "jetstream"  # core NATS publishes fire and forget


NATS = Nats()
