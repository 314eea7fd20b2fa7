"""NATS Streaming (STAN): nats-streaming-server built from the Go module proxy, the streaming protocol spoken over
nats-py by this package's own small client (docs/stan.md says why not the 2019 PyPI client).

End of life (JetStream replaced it), but seed 000's question — what fsync per batch costs against Kafka's
page-cache durability — is asked of it.

- `settings.py`: `StanBroker`, `StanClient` and the cell `StanCell`, with what only NATS Streaming refuses;
- `release.py`: the server of a version, built with the machine's Go into the cache;
- `server.py`, `provision.py`: one server per cell, node 0 of the broker-control protocol;
- `protocol.py`, `client.py`: the streaming protocol's messages and a small asyncio client of it on nats-py;
- `driver.py`: publish with PubAck, queue-group subscriptions (durable or not) with the driver's own acks;
- `access.py`: a server the cell does not own (its NATS address and the cluster id of the matrix);
- `omb.py`: OpenMessaging Benchmark's NATS Streaming driver files in the cell's terms (`sixnines import omb`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .settings import StanBroker, StanCell, StanClient


def store_tag(broker: Any) -> str:
    """memory, file_sync or file_nosync: the three servers seed 000 compares."""
    if broker.store == "memory":
        return "memory"
    return "file_sync" if broker.file_sync else "file_nosync"


class Stan(System):
    name: ClassVar[str] = "stan"
    cell_model = StanCell
    setup_estimate_s = 3.0  # one Go process; the file store recovers an empty directory
    calibration_measurement = "e2e"
    calibration_broker: ClassVar[Mapping[str, Any]] = {"store": "memory"}
    # One server, node 0, so every target is it. restart: its command again on the same store (the file store
    # keeps what it acknowledged; the memory store comes back empty).
    fault_actions = frozenset({"stall", "kill", "restart"})
    fault_targets = frozenset({"leader", "node", "random"})

    @staticmethod
    def fault_nodes(broker: Any) -> list[int]:
        return [0]

    client_libraries = ("nats-py", "protobuf")

    def label(self, spec: Any) -> str:
        setup = f"stan/{store_tag(spec.broker).replace('_', ' ')}"
        return setup + (" durable" if spec.client.durable else "")

    def group_tag(self, spec: Any) -> str:
        return store_tag(spec.broker)

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        return True  # every publish gets a PubAck once the server has stored the message

    def fetch_release(self, version: str) -> Path:
        from .release import server_binary

        return server_binary(version)

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """The file store's PubAck means the message is on disk (or in the page cache, without file_sync) and
        survives the server; the memory store's survives nothing, so only the file store is held to no loss."""
        return (spec.get("broker") or {}).get("store") == "file"

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import StanDriver

        return StanDriver(address, spec, names, route, client)

    def omb_driver(self) -> Any:
        from .omb import StanOmb

        return StanOmb()

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"cluster_id": spec.broker.cluster_id}


STAN = Stan()

# public name -> module of this package, imported on first use (`systems/exports.py` says why): a server started
# outside a cell and what it says it is, this package's streaming client (nats-py) and the protocol's messages
_LAZY = {
    "start_server": "provision",
    "reported_version": "release",
    "connect": "client",
    "SubscriptionOptions": "client",
    **dict.fromkeys(("Ack", "MsgProto", "PubAck", "PubMsg"), "protocol"),
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["STAN", "Stan", "StanBroker", "StanCell", "StanClient", "store_tag", *_LAZY]
