"""NATS (core and JetStream): the real nats-server, nats-py clients."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .settings import NatsBroker, NatsCell, NatsClient


class Nats(System):
    name: ClassVar[str] = "nats"
    cell_model = NatsCell
    setup_estimate_s = 5.0
    calibration_measurement = "rtt"  # core request/reply: a synchronous connection's service time hides a stall
    calibration_broker: ClassVar[Mapping[str, Any]] = {"mode": "core"}
    client_libraries = ("nats-py",)
    # restart: the node's command again, same config and data; partition, bandwidth: on a node's own link (each node
    # in a network namespace of its own)
    fault_actions = frozenset({"stall", "kill", "restart", "partition", "bandwidth"})
    node_hosts = True
    fault_targets = frozenset({"leader", "follower", "controller", "node", "random"})

    @staticmethod
    def leader_refusal(broker: Any) -> str | None:
        """Only an R3 stream on 3 servers: its leader moves by step-down (`leader`); an R1 stream lives on one
        node, which a step-down cannot change, and a single server leads everything."""
        if broker.servers == 3 and broker.replicas == 3:
            return None
        return f"places a leader only for a JetStream R3 stream on 3 servers (is servers {broker.servers}, " + (
            f"replicas {broker.replicas})"
        )

    @staticmethod
    def fault_nodes(broker: Any) -> list[int]:
        """A single server is node 0; a cluster's nodes are 1..servers."""
        return [0] if broker.servers == 1 else list(range(1, broker.servers + 1))

    def label(self, spec: Any) -> str:
        setup = f"nats/{spec.broker.mode}"
        if spec.broker.servers > 1 or spec.broker.replicas > 1:  # single-server labels stay as they were
            setup += f" n{spec.broker.servers} R{spec.broker.replicas}"
        return setup

    def group_tag(self, spec: Any) -> str:
        return spec.broker.mode

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        return broker.get("mode", "core") == "jetstream"  # core NATS publishes fire and forget

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        return self.sends_acknowledged(spec.get("broker") or {})  # a JetStream PubAck means the stream has it

    def promises_no_acknowledged_loss(self, spec: Mapping[str, Any]) -> bool:
        """A JetStream PubAck of an R3 (or larger) file-backed stream: a majority of the replicas has the
        message before it is acknowledged, on disk, so one node's loss or restart does not lose it."""
        broker = spec.get("broker") or {}
        return (
            self.delivery_guaranteed(spec) and int(broker.get("replicas", 1)) >= 3 and broker.get("storage") == "file"
        )

    def fetch_release(self, version: str) -> Path:
        from .release import server_binary

        return server_binary(version)

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import NatsDriver

        return NatsDriver(address, spec, names, route, client)

    def omb_driver(self) -> Any:
        from .omb import NatsOmb

        return NatsOmb()

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"mode": spec.broker.mode}


NATS = Nats()

# public name -> module of this package, imported on first use (`systems/exports.py` says why): the NATS CLI
# (`nats bench`, `nats latency`) built for the native comparison, and its output read (`native.py`)
_LAZY = dict.fromkeys(
    ("NATSCLI_VERSION", "latency_percentiles_ms", "natscli", "natscli_version", "parse_nats_bench_csv"), "native"
)


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["NATS", "Nats", "NatsBroker", "NatsCell", "NatsClient", *_LAZY]
