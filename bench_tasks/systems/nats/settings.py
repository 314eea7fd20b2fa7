"""NATS settings: the broker and client models and the cell, with the checks only NATS knows.

Only what the harness itself needs is modelled (STYLE 2); `server:` and `connect:` pass through to
nats-server's config file and nats-py untouched. Releases come from the registries (`release.py`) and are checked
against the cached release list; what a release lacks for a cell (JetStream before 2.2.0) is refused here, from
the version alone, so a matrix fails when it is parsed rather than when the server starts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...spec.cell import BrokerSettings, CellBase, ClientSettings
from ...spec.features import predates
from ...spec.leader import leader_field

# The first release of each feature a cell may need; older releases are refused for it at validation (the
# release list offers every 2.x release, docs/README say which are measured how).
JETSTREAM_SINCE = "2.2.0"
# A cluster is ready when every node's /healthz says so (cluster.py): the module proxy lists 2.6.1, which answers
# 404, and 2.7.3, which answers; the releases between them are not listed, so none of them can be named.
HEALTHZ_SINCE = "2.7.0"
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
    system: Literal["nats"]
    broker: NatsBroker = NatsBroker()
    client: NatsClient = NatsClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> NatsCell:
        problem = release_problem(self.version, self.broker)
        if problem is not None:
            raise ValueError(problem)
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


def release_problem(version: str, broker: NatsBroker) -> str | None:
    """What release `version` (exact, or a line such as 2.1.x all of whose releases do) lacks for `broker`, naming
    the setting and the first release that has it; None when it has what the cell needs (a line that reaches that
    release, or `latest`, resolves to its newest release)."""
    if broker.mode == "jetstream" and predates(version, JETSTREAM_SINCE):
        return (
            f"broker.mode 'jetstream': nats-server {version} predates JetStream (first in {JETSTREAM_SINCE}); "
            "use mode 'core' or a later release"
        )
    if broker.servers > 1 and predates(version, HEALTHZ_SINCE):
        return (
            f"broker.servers {broker.servers}: nats-server {version} has no /healthz, which tells the harness a "
            f"cluster is ready (first in {HEALTHZ_SINCE}); use one server or a later release"
        )
    return None
