"""NATS Streaming settings: the broker and client models and the cell, with the checks only NATS Streaming knows.

Only what the harness itself needs is modelled (STYLE 2). `server:` passes through to the top level of the
server's config file (the embedded NATS server: `max_payload`, `write_deadline`, …), `streaming:` to its
`streaming { }` section (`hb_interval`, `file_options`, …), `connect:` to nats-py untouched. What the model owns
(store, file_sync, channel limits, cluster id) cannot be set a second time through a pass-through map.

`file_sync` is always recorded for the file store: with it on, a PubAck means the message was fsync'ed; with it off,
only that it reached the OS (seed 000's comparison with Kafka's page-cache durability).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ...errors import BrokerError
from ...spec.base import StrictModel
from ...spec.cell import BrokerSettings, CellBase, ClientSettings
from ..nats.auth import client_credentials
from ..nats.settings import server_key_problem

_DURATION = r"^\d+(ns|us|ms|s|m|h)$"  # what Go's time.ParseDuration reads, in the forms a matrix needs
_NAME = r"^[A-Za-z0-9_-]+$"  # the server's rule for cluster and client ids

# Keys of the `streaming { }` section the model owns, by the model field to use instead (the server reads every
# alias listed in its conf.go).
_OWNED_STREAMING_KEYS: dict[str, str] = {
    **dict.fromkeys(("id", "cid", "cluster_id"), "broker.cluster_id"),
    **dict.fromkeys(("st", "store_type", "store", "storetype"), "broker.store"),
    **dict.fromkeys(("dir", "datastore"), "the cell's store directory (the harness sets it)"),
    **dict.fromkeys(("limits", "store_limits", "storelimits"), "broker.limits"),
    **dict.fromkeys(("ns", "nats_server", "nats_server_url"), "nothing: each cell runs its own embedded server"),
}
_OWNED_FILE_KEYS = ("sync", "do_sync", "sync_on_flush")


class StanLimits(StrictModel):
    """Channel limits (the server's `store_limits`); unset means the server's default, 0 means unlimited. The
    defaults keep 1,000,000 messages or 1 GB per channel: a longer or bigger cell drops its oldest messages."""

    max_channels: int | None = Field(None, ge=0)
    max_subs: int | None = Field(None, ge=0, description="subscriptions per channel")
    max_msgs: int | None = Field(None, ge=0, description="messages kept per channel")
    max_bytes: int | None = Field(None, ge=0, description="bytes kept per channel")
    max_age: str | None = Field(None, pattern=_DURATION, description="how long a message is kept, e.g. 10m")
    max_inactivity: str | None = Field(None, pattern=_DURATION, description="an idle channel is removed after this")

    def config(self) -> dict[str, Any]:
        """The `store_limits { }` section: only what the matrix set."""
        return self.model_dump(exclude_none=True)


class StanBroker(BrokerSettings):
    """nats-streaming-server settings. The file store's `file_sync` is filled in (the server's default, on) so two
    spellings of one server are one cell; the memory store has none."""

    store: Literal["memory", "file"] = "memory"
    file_sync: bool | None = Field(
        None, description="file store: fsync every flushed batch before acknowledging (the server's default: on)"
    )
    limits: StanLimits = StanLimits()
    cluster_id: str | None = Field(
        None,
        pattern=_NAME,
        description="the streaming cluster id clients connect to; unset: one of the cell's own (external: required)",
    )
    server: dict[str, Any] = Field(default_factory=dict, description="the config file's top level (NATS), verbatim")
    streaming: dict[str, Any] = Field(default_factory=dict, description="its `streaming { }` section, verbatim")

    @model_validator(mode="before")
    @classmethod
    def _file_sync_recorded(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("store") == "file" and data.get("file_sync") is None:
            return {**data, "file_sync": True}
        return data

    @model_validator(mode="after")
    def _settings_fit(self) -> StanBroker:
        if self.file_sync is not None and self.store != "file":
            raise ValueError(f"file_sync: needs store 'file' (store is {self.store!r}; the memory store never syncs)")
        for key in self.streaming:
            if key.lower() in _OWNED_STREAMING_KEYS:
                raise ValueError(f"streaming.{key}: set by the harness; use {_OWNED_STREAMING_KEYS[key.lower()]}")
        file_options = self.streaming.get("file_options") or self.streaming.get("file") or {}
        for key in file_options if isinstance(file_options, dict) else ():
            if key.lower() in _OWNED_FILE_KEYS:
                raise ValueError(f"streaming.file_options.{key}: use broker.file_sync (it is recorded with the cell)")
        problem = server_key_problem(self.server)  # the embedded nats-server's: it listens where the harness says
        if problem is not None:
            raise ValueError(problem)
        if "authorization" in self.server:
            try:
                client_credentials(self.server["authorization"], required=True)
            except BrokerError as exc:
                raise ValueError(str(exc)) from None
        return self


StartPosition = Literal["new_only", "last_received", "first", "sequence", "time_delta"]


class StanClient(ClientSettings):
    """The streaming protocol's client options; `connect` goes to nats.connect() untouched."""

    connect: dict[str, Any] = Field(default_factory=dict, description="kwargs for nats.connect()")
    durable: bool = Field(False, description="durable subscriptions: the server keeps their position across restarts")
    start_position: StartPosition = Field(
        "new_only", description="where a new subscription starts (a durable resumes where it left off)"
    )
    start_sequence: int | None = Field(None, ge=1, description="start_position 'sequence': the first sequence")
    start_time_delta_s: float | None = Field(None, gt=0, description="start_position 'time_delta': how far back")
    ack_wait_s: int = Field(30, ge=1, description="a delivered message unacknowledged this long is redelivered")
    max_in_flight: int = Field(1024, ge=1, description="unacknowledged deliveries per subscription")
    max_pub_acks_in_flight: int = Field(
        16384, ge=1, description="unacknowledged publishes per connection; beyond it a publish fails (never waits)"
    )
    pub_ack_wait_s: float = Field(30.0, gt=0, description="a publish not acknowledged this long fails as timed out")

    @model_validator(mode="after")
    def _start_fits(self) -> StanClient:
        wanted = {"sequence": "start_sequence", "time_delta": "start_time_delta_s"}
        for position, field in wanted.items():
            value = getattr(self, field)
            if self.start_position == position and value is None:
                raise ValueError(f"{field}: required when start_position is {position!r}")
            if self.start_position != position and value is not None:
                raise ValueError(f"{field}: applies to start_position {position!r} only (is {self.start_position!r})")
        return self


class StanCell(CellBase):
    """One fully specified NATS Streaming benchmark cell."""

    SYSTEM: ClassVar[str] = "stan"
    system: Literal["stan"]
    broker: StanBroker = StanBroker()
    client: StanClient = StanClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> StanCell:
        if self.measurement not in ("e2e", "publish"):
            raise ValueError(
                f"measurement {self.measurement!r}: NATS Streaming cells measure 'e2e' or 'publish' (its PubAck); "
                "it has no request/reply"
            )
        if self.workload.prefill_messages or self.workload.lagging_consumers:
            raise ValueError("workload.prefill_messages and lagging_consumers are not supported for NATS Streaming yet")
        for name, bg in self.background.items():
            if bg.partitioned_fields_set():
                raise ValueError(
                    f"background.{name}: {', '.join(bg.partitioned_fields_set())} apply to partitioned systems only"
                )
        if self.brokers == "external":
            self._fits_external()
        return self

    def _fits_external(self) -> None:
        """An external server keeps its own store and limits; the cell only needs its cluster id to connect."""
        if self.broker.cluster_id is None:
            raise ValueError("broker.cluster_id: required for brokers 'external' (the cluster id clients connect to)")
        defaults = StanBroker(cluster_id=self.broker.cluster_id)
        for field in ("store", "file_sync", "limits", "streaming"):
            if getattr(self.broker, field) != getattr(defaults, field):
                raise ValueError(f"broker.{field}: an external server keeps its own; leave it unset")
