"""A cell's spec, whatever the system: the workload, where its roles run, and what every cell checks.

A cell id is a short stable hash of the cell's full validated spec (defaults filled in, version included); the
series key is the same hash without the version, so history can follow one cell across releases and a version
comparison can pair cells that differ only in version. Defaults are part of the spec, so a model that gains a
field with a default gives every cell a new id, unless its serializer leaves the field out while unset (as
`placement`, `hosts` and `network` do).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_serializer, model_validator

from ..core.header import RELAYED_MIN_SIZE
from ..releases import release_problem
from ..secrecy import recorded_model
from .background import Background
from .base import MessageSizeBytes, SettingsModel, StrictModel
from .faults import FaultSpec, FaultSupport, check_fault_links, check_fault_nodes, check_faults, check_worker_faults
from .leader import LeaderSupport, check_leader, refuse_unplaceable
from .placement import Host, Network, Placement, check_node_hosts, check_placement

MEASUREMENTS = ("e2e", "publish", "rtt", "chain")
Measurement = Literal["e2e", "publish", "rtt", "chain"]
_BACKGROUND_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
_ID_LEN = 12
BrokerSource = Literal["provisioned", "external"]
# Airflow connection ids: what `AIRFLOW_CONN_<ID>` (upper-cased) and the UI accept without quoting.
ConnectionId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_]+$", max_length=200)]
EXTERNAL_VERSION = "external"  # the version of an external cell: the brokers report their own, into the context


class CpuPlacement(StrictModel):
    """CPU ids each role is pinned to (sched_setaffinity); empty means not pinned. On a small host, giving
    the producers a core of their own keeps the broker's and consumers' work out of the send schedule.
    Checked against the host's CPUs when the cell starts, and recorded with the cell.

    `producers_share` / `receivers_share` cap the CPU time of each such worker process, in CPUs (0.05: 5 % of
    one), through a cgroup CFS quota (bench_tasks.load.cpushare) taken on once the worker is set up: a starved
    generator on purpose, to see what a smaller generator host still drives and to prove the harness says when
    it is the bottleneck."""

    broker: list[int] = Field(default_factory=list)
    producers: list[int] = Field(default_factory=list)
    receivers: list[int] = Field(default_factory=list)
    producers_share: float | None = Field(None, gt=0, le=1024, description="CPU time per producer process, CPUs")
    receivers_share: float | None = Field(None, gt=0, le=1024, description="CPU time per receiver process, CPUs")

    @model_serializer(mode="wrap")
    def _without_shares(self, handler: Any) -> dict[str, Any]:
        """Placements without shares dump as before the keys existed, so existing cell ids stay the same."""
        return _drop_none(handler(self), ("producers_share", "receivers_share"))

    def share(self, role: str) -> float | None:
        """The CPU share of a worker of `role` (producers and background writers, or receivers)."""
        return self.producers_share if role in ("producer", "background") else self.receivers_share


class Workload(StrictModel):
    """Load shape of one cell. Rates are totals for the workload, split evenly over producers."""

    message_size_bytes: MessageSizeBytes
    rate_per_s: float = Field(gt=0)
    producers: int = Field(1, ge=1)
    consumers: int = Field(1, ge=0, description="e2e/chain: subscribers (a queue group); rtt: responders")
    connections: int = Field(1, ge=1, description="rtt: synchronous request/reply connections per producer")
    warmup_s: float = Field(2.0, ge=0)
    measure_s: float = Field(gt=0)
    cooldown_s: float = Field(1.0, ge=0)
    arrival: Literal["uniform", "poisson"] = "uniform"
    payload: Literal["random"] = "random"
    drain_timeout_s: float = Field(
        5.0, gt=0, description="how long to wait for stragglers after cooldown, or the producers' last send or ack"
    )
    request_timeout_s: float = Field(10.0, gt=0, description="rtt/publish: a reply later than this is lost")
    max_schedule_lag_ms: float = Field(
        100.0, gt=0, description="fail the cell when generator schedule lag p99.9 exceeds this"
    )
    seed: int = Field(0, ge=0, description="poisson schedules are reproducible per seed")
    prefill_messages: int = Field(
        0, ge=0, description="a backlog written before the cell starts (systems that keep one)"
    )
    lagging_consumers: int = Field(
        0,
        ge=0,
        description="unmeasured consumers reading the route from its oldest message (systems that keep a backlog)",
    )
    relays: int = Field(1, ge=1, description="chain: relay services (one group) between the two hops")
    allowed_loss_ratio: float = Field(
        0.0,
        ge=0,
        le=1,
        description="loss the data-quality gate tolerates where delivery is not guaranteed (fire-and-forget "
        "sends, a leader's ack only); cells whose system guarantees delivery tolerate none",
    )
    cpus: CpuPlacement = CpuPlacement()
    placement: Placement | None = Field(None, description="hosts of the broker, producers and consumers")

    @model_serializer(mode="wrap")
    def _without_placement(self, handler: Any) -> dict[str, Any]:
        """A workload without a placement dumps as before it existed, so existing cell ids stay the same."""
        return _drop_none(handler(self), ("placement",))

    @model_validator(mode="after")
    def _measure_holds_messages(self) -> Workload:
        streams = self.producers * self.connections
        if self.measure_s * self.rate_per_s < streams:
            raise ValueError(
                f"measure_s={self.measure_s} at rate_per_s={self.rate_per_s} holds fewer than one message "
                f"for each of the {streams} sending streams (producers × connections)"
            )
        return self


class BrokerSettings(SettingsModel):
    """What every system's broker settings have: the server's own config, passed through untouched (a system's
    model adds its own fields). External brokers keep their own config, so theirs must stay empty."""

    server: dict[str, Any] = Field(default_factory=dict, description="the server's own config, verbatim")

    @model_serializer(mode="wrap")
    def _without_leader(self, handler: Any) -> dict[str, Any]:
        """Broker settings without a leader (`leader_field`, on systems that place one) dump as before the key
        existed, so existing cell ids stay the same."""
        return _drop_none(handler(self), ("leader",))


class ClientSettings(SettingsModel):
    """Every system's client settings derive from this (each adds its library's pass-through maps)."""


class JvmClientSettings(ClientSettings):
    """Client settings of a system whose cells may run on a Java client in the JVM worker: the subclass adds
    `library` (its Python client's name first, `java` beside it) and says which is its default."""

    DEFAULT_LIBRARY: ClassVar[str]
    jvm_flags: list[str] = Field(default_factory=list, description="library java: extra JVM options, verbatim")

    @model_serializer(mode="wrap")
    def _without_defaults(self, handler: Any) -> dict[str, Any]:
        """A client on the default library without JVM flags dumps as before either existed: cell ids stay the
        same."""
        data = handler(self)
        if data.get("library") == self.DEFAULT_LIBRARY:
            del data["library"]
        if not data.get("jvm_flags"):
            data.pop("jvm_flags", None)
        return data


class CellBase(SettingsModel):
    """One fully specified benchmark cell, whatever the system: each system's cell model (its package's
    settings module) adds `system`, `broker` and `client` and the checks only it knows."""

    SYSTEM: ClassVar[str]
    FAULTS: ClassVar[FaultSupport] = FaultSupport()  # set by the model's System: what `faults:` may ask
    LEADERS: ClassVar[LeaderSupport] = LeaderSupport()  # set by the model's System: can `broker.leader` be placed
    version: str
    brokers: BrokerSource = Field(
        "provisioned",
        description="provisioned: the cell starts its own brokers; external: it uses running ones via `connection`",
    )
    connection: ConnectionId | None = Field(
        None, description="external: the Airflow connection id (address, credentials, TLS) resolved at run time"
    )
    workload: Workload
    measurement: Measurement
    background: dict[str, Background] = Field(
        default_factory=dict, description="unmeasured workloads running beside the measured one, by name"
    )
    hosts: dict[str, Host] | None = Field(None, description="the matrix's hosts this cell's placement uses")
    network: Network | None = Field(None, description="bandwidth cap on the cell's network-namespace links")
    broker: BrokerSettings
    client: ClientSettings
    # After broker: its validator asks the system which node ids those broker settings give.
    faults: list[FaultSpec] = Field(
        default_factory=list, description="faults fired during the measure phase, on its clock (`spec.faults`)"
    )

    @model_serializer(mode="wrap")
    def _without_hosts(self, handler: Any) -> dict[str, Any]:
        """Cells without hosts, a network cap or faults dump as before those existed, so existing cell ids stay
        the same."""
        data = _drop_none(handler(self), ("hosts", "network"))
        if not data.get("faults", True):
            del data["faults"]
        return data

    @field_validator("faults")
    @classmethod
    def _faults_fit(cls, value: list[FaultSpec], info: ValidationInfo) -> list[FaultSpec]:
        """What the cell's system can do to its nodes (asked of the system, so the core names none), inside
        the measure phase; external brokers are not the harness's to signal."""
        if not value:
            return value
        if info.data.get("brokers") == "external":
            raise ValueError("external brokers run elsewhere; faults signal the brokers a cell provisions")
        workload = info.data.get("workload")
        if workload is None:
            return value  # the workload's own error is reported
        support = cls.FAULTS
        problems = check_faults(value, workload.measure_s, support.actions, support.targets, support.system)
        problems += check_worker_faults(value, info.data.get("measurement", ""), workload.relays)
        broker = info.data.get("broker")
        problems += check_fault_nodes(value, support.nodes(broker) if broker is not None else None)
        problems += check_fault_links(value, _node_links(workload.placement, info.data.get("hosts") or {}))
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: str) -> str:
        """Checked against the system's cached release list (matrices validate without the network)."""
        problem = None if value == EXTERNAL_VERSION else release_problem(cls.SYSTEM, value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _workload_fits_measurement(self) -> CellBase:
        """Checks every system shares; each subclass adds what only its system knows."""
        if self.measurement in ("e2e", "rtt", "chain") and self.workload.consumers < 1:
            raise ValueError(f"measurement {self.measurement!r} needs workload.consumers >= 1")
        if self.measurement != "rtt" and self.workload.connections != 1:
            raise ValueError("workload.connections applies to measurement 'rtt' only; leave it at 1")
        if self.measurement == "chain" and self.workload.message_size_bytes < RELAYED_MIN_SIZE:
            raise ValueError(
                f"measurement 'chain' needs workload.message_size_bytes >= {RELAYED_MIN_SIZE} "
                "(the header plus the relay's stamp)"
            )
        if self.measurement != "chain" and self.workload.relays != 1:
            raise ValueError("workload.relays applies to measurement 'chain' only; leave it at 1")
        for name in self.background:
            if not _BACKGROUND_NAME.match(name):
                raise ValueError(f"background name {name!r}: use lower case letters, digits and underscores")
        placement = self.workload.placement
        if placement is None:
            if self.network is not None:
                raise ValueError("network: caps links between hosts; it needs workload.placement on hosts")
            return self
        w = self.workload
        hosts, network = self.hosts or {}, self.network
        problems = check_placement(placement, hosts, network, self.measurement, w.producers, w.consumers)
        if not problems and self.brokers != "external":
            support = self.FAULTS
            problems = check_node_hosts(placement, support.nodes(self.broker), support.system, support.node_hosts)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="before")
    @classmethod
    def _leader_known(cls, data: Any) -> Any:
        """A system whose broker settings have no `leader` refuses one saying so, not as an unknown key."""
        broker_model = cls.model_fields["broker"].annotation
        if isinstance(data, dict) and "leader" not in getattr(broker_model, "model_fields", {"leader": None}):
            refuse_unplaceable(data.get("broker"), cls.LEADERS)
        return data

    @model_validator(mode="after")
    def _leader_fits(self) -> CellBase:
        """A `broker.leader` the system can place on a node the cell has (asked of the system, like faults)."""
        broker = self.broker
        nodes = self.FAULTS.nodes(broker)
        leader = getattr(broker, "leader", None)
        problems = check_leader(leader, broker, self.brokers == "external", self.LEADERS, nodes)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _brokers_fit(self) -> CellBase:
        """External brokers are reached through a connection and report their own version; nothing of how
        they run (processes, server config, CPUs) is the cell's to set."""
        if self.brokers == "external":
            if self.connection is None:
                raise ValueError("connection: required when brokers is 'external' (an Airflow connection id)")
            if self.version != EXTERNAL_VERSION:
                raise ValueError(
                    f"version {self.version!r}: external brokers report their own version (recorded in the "
                    f"context); use versions [{EXTERNAL_VERSION}] or leave versions out"
                )
            if self.workload.cpus.broker:
                raise ValueError("workload.cpus.broker: external brokers run elsewhere; they cannot be pinned")
            if self.broker.server:
                raise ValueError("broker.server: external brokers keep their own server config; leave it empty")
            if placed_in_netns(self):
                raise ValueError(
                    f"workload.placement: hosts {', '.join(placed_in_netns(self))} are network namespaces, which "
                    "are isolated from the network external brokers are reached on; place external-broker cells "
                    "on hosts without netns"
                )
        else:
            if self.connection is not None:
                raise ValueError("connection: only for brokers 'external'; provisioned brokers need none")
            if self.version == EXTERNAL_VERSION:
                raise ValueError(f"version {EXTERNAL_VERSION!r} is for brokers 'external' only")
        return self


def cell_id(cell: CellBase) -> str:
    """Stable short hash of the full spec as it is recorded (secrets redacted: `secrecy.recorded_model`); equal
    specs give equal ids on every machine, and neither an id nor a series key is a function of a password."""
    return _digest(recorded_model(cell, scrub=False))


def series_key(cell: CellBase) -> str:
    """The cell id with the version left out: follows one cell across releases."""
    spec = recorded_model(cell, scrub=False)
    spec.pop("version")
    return _digest(spec)


def _digest(spec: dict[str, Any]) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:_ID_LEN]


def placed_in_netns(cell: CellBase) -> list[str]:
    """The cell's placed hosts that are realised as network namespaces."""
    placement, hosts = cell.workload.placement, cell.hosts or {}
    return [h for h in (placement.all_hosts() if placement else []) if h in hosts and hosts[h].netns]


def _node_links(placement: Placement | None, hosts: dict[str, Host]) -> bool:
    """Each broker node on a network-namespace host of its own: a link of its own to cut or squeeze."""
    if placement is None or not placement.per_node():
        return False
    return all(h in hosts and hosts[h].netns for h in placement.broker_hosts())


def _drop_none(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    for key in keys:
        if key in data and data[key] is None:
            del data[key]
    return data
