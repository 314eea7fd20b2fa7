"""NATS (core and JetStream): the real nats-server, nats-py clients."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from .settings import NatsCell


class Nats(System):
    name: ClassVar[str] = "nats"
    cell_model = NatsCell
    setup_estimate_s = 5.0
    calibration_measurement = "rtt"  # core request/reply: a synchronous connection's service time hides a stall
    calibration_broker: ClassVar[Mapping[str, Any]] = {"mode": "core"}
    client_libraries = ("nats-py",)

    def label(self, spec: Any) -> str:
        setup = f"nats/{spec.broker.mode}"
        if spec.broker.servers > 1 or spec.broker.replicas > 1:  # single-server labels stay as they were
            setup += f" n{spec.broker.servers} R{spec.broker.replicas}"
        return setup

    def group_tag(self, spec: Any) -> str:
        return spec.broker.mode

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        return broker.get("mode", "core") == "jetstream"  # core NATS publishes fire and forget

    def fetch_release(self, version: str) -> Path:
        from .release import server_binary

        return server_binary(version)

    def describe_running(self, state: Mapping[str, Any]) -> list[str]:
        from .provision import describe_running

        return describe_running(state)

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import NatsDriver

        return NatsDriver(address, spec, names, route, client)

    def omb_driver(self) -> Any:
        from .omb import NatsOmb

        return NatsOmb()

    def start_brokers(self, spec: Any, names: str, workdir: Path, tie_to_parent: bool, host: str) -> Any:
        from .provision import start_brokers

        return start_brokers(spec, names, workdir, tie_to_parent, host)

    def leader_poll(
        self, address: str, client: Mapping[str, Any], ref: Mapping[str, Any], patient: bool, paused: Callable
    ) -> Any:
        from .provision import leader_poll

        return leader_poll(ref, patient, paused)

    def retarget_leader(self, ref: Mapping[str, Any] | None, spec: Any, names: str) -> dict[str, Any] | None:
        from .provision import retarget

        return retarget(ref, spec, names)

    def client_access(self, conn: Any, spec: Any) -> Any:
        from .access import client_access

        return client_access(conn, spec)

    def ask_version(self, address: str, client: Mapping[str, Any], spec: Any) -> dict[str, Any]:
        from .access import ask_version

        return ask_version(address, client, spec)

    def route_names(self, spec: Any, names: str) -> list[str]:
        from .access import route_names

        return route_names(spec, names)

    def delete_routes(self, address: str, client: Mapping[str, Any], spec: Any, names: str) -> list[str]:
        from .access import delete_routes

        return delete_routes(address, client, spec, names)

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"mode": spec.broker.mode}


NATS = Nats()
