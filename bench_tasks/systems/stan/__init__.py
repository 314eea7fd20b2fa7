"""NATS Streaming (STAN): nats-streaming-server built from the Go module proxy, the streaming protocol spoken over
nats-py by this package's own small client (docs/stan.md says why not the 2019 PyPI client).

End of life (JetStream replaced it), but seed 000's question — what fsync per batch costs against Kafka's
page-cache durability — is asked of it. Not registered in `bench_tasks.systems` until its driver exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from .settings import StanCell


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

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"cluster_id": spec.broker.cluster_id}


STAN = Stan()
