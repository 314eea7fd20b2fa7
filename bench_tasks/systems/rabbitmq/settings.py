"""RabbitMQ's settings models: what the harness needs to build a node and a route; native options pass through.

`broker.server` goes to every node's rabbitmq.conf, `broker.queue` to the queue's `x-` arguments, `broker.erl_args`
to the Erlang VM, `client.connect` to the client library's connect call, so a matrix can sweep any native option
without the harness knowing it.

What is refused is what RabbitMQ refuses or silently ignores, because a cell labelled with a setting that had no
effect would publish a number under the wrong name:
- quorum queues and streams are always durable and write every message to disk, whatever its delivery mode, so
  `durable: false` or `persistent: false` with them is an error (left out, both default to true for them);
- a classic queue writes a persistent message to disk only if the queue is durable, so `persistent: true` on a
  transient classic queue is an error;
- `basic.qos` limits only consumers that acknowledge, so a prefetch with `acks: auto` is an error;
- a stream consumer must acknowledge manually and set a prefetch (`check_pair`, which sees both models).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...spec.cell import BrokerSettings, CellBase, JvmClientSettings
from .jvm_client import java_refusals

QueueType = Literal["classic", "quorum", "stream"]

# rabbitmq.conf keys the harness writes itself for every node (its listener, its cluster, its user): a matrix
# that set them would break the node's start or its cluster, so they are refused by prefix, naming the key.
HARNESS_CONF_PREFIXES: tuple[str, ...] = (
    "listeners.",
    "cluster_formation.",
    "cluster_nodes",
    "loopback_users",
    "log.file",
    "log.dir",
)

# rabbitmq.conf keys that open a listener or say where one listens or what it advertises: the management, Prometheus,
# STOMP, MQTT, stream and Web-STOMP/MQTT plugins' listeners, stream replication's ports, and the distribution
# listener (the harness binds it to the cell's host address with `-kernel inet_dist_use_interface`). Each node
# listens on its AMQP port and its distribution port of the cell's host address, and nowhere else.
LISTENER_CONF_PREFIXES: tuple[str, ...] = (
    "distribution.listener.",
    "management.tcp.",
    "management.ssl.",
    "management.listener.",
    "prometheus.tcp.",
    "prometheus.ssl.",
    "stomp.listeners.",
    "mqtt.listeners.",
    "stream.listeners.",
    "stream.advertised_",
    "stream.replication.port_range.",
    "web_stomp.tcp.",
    "web_stomp.ssl.",
    "web_stomp.port",
    "web_mqtt.tcp.",
    "web_mqtt.ssl.",
)
# What cuttlefish reads as a key: dot-separated words. Anything else (a leading blank, `=`) would let a key dodge the
# prefixes above and still be read as one of them.
_CONF_KEY = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")

# Erlang VM flags that run code, read another config or arguments file, or start or name a distribution service
# (epmd, a node name, a cookie): none of it would be in the cell's record, and each can open a listener.
_ERL_REFUSED_FLAGS = frozenset(
    {"-eval", "-s", "-S", "-run", "-config", "-args_file", "-boot", "-start_epmd", "-epmd_module", "-proto_dist"}
    | {"-dist_listen", "-name", "-sname", "-setcookie", "-remsh", "-detached"}
)
# Application settings (`-app param value`) that open or move a listener: `-rabbit tcp_listeners`, a plugin's
# `tcp_config`/`listener`, stream advertising, and the distribution's interface and port range.
_ERL_LISTENER_PARAM = re.compile(
    r"\w*listeners?|(tcp|ssl)_config|advertised_\w+|inet_dist_(use_interface|listen_\w+)|dist_listen"
)

# Queue arguments that other fields own: the type is `queue_type`, the replica count `replicas`.
OWNED_QUEUE_ARGS: dict[str, str] = {
    "x-queue-type": "queue_type",
    "x-quorum-initial-group-size": "replicas",
    "x-initial-cluster-size": "replicas",
}

_REPLICATED: tuple[str, ...] = ("quorum", "stream")


class RabbitmqBroker(BrokerSettings):
    """The nodes and the route (exchange → queue) a cell measures. Left out, `durable`, `persistent` and
    `replicas` take the queue type's own behaviour (classic: transient, one copy; quorum and stream: durable,
    on disk, on every node), so the recorded spec always says what the broker did."""

    nodes: Literal[1, 3] = Field(1, description="RabbitMQ nodes: 1, or a 3-node cluster")
    queue_type: QueueType = Field("classic", description="x-queue-type of the cell's queue")
    durable: bool = Field(False, description="the queue survives a node restart (quorum and stream: always)")
    persistent: bool = Field(
        False, description="messages published with delivery mode 2 (quorum and stream: always on disk)"
    )
    replicas: int = Field(1, ge=1, description="quorum/stream replicas (initial group size), at most `nodes`")
    exchange: Literal["default", "direct", "fanout", "topic", "headers"] = Field(
        "default", description="'default': the nameless default exchange; otherwise a declared exchange of that type"
    )
    queue: dict[str, Any] = Field(default_factory=dict, description="queue arguments (x-…), verbatim")
    server: dict[str, Any] = Field(default_factory=dict, description="rabbitmq.conf settings, verbatim")
    erl_args: str = Field("", description="extra Erlang VM flags for every node (e.g. '+sbwt none'), verbatim")

    @model_validator(mode="before")
    @classmethod
    def _type_defaults(cls, data: Any) -> Any:
        """Fill what the user left out with what the queue type does, before the checks below see it."""
        if not isinstance(data, Mapping):
            return data
        filled = dict(data)
        replicated = filled.get("queue_type") in _REPLICATED
        filled.setdefault("durable", replicated)
        filled.setdefault("persistent", replicated)
        filled.setdefault("replicas", filled.get("nodes", 1) if replicated else 1)
        return filled

    @field_validator("queue")
    @classmethod
    def _queue_arguments(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key in OWNED_QUEUE_ARGS:
                raise ValueError(f"broker.queue[{key!r}] is set by broker.{OWNED_QUEUE_ARGS[key]}; use that field")
            if not key.startswith("x-"):
                raise ValueError(f"broker.queue[{key!r}]: queue arguments start with 'x-' (e.g. 'x-max-length')")
        return value

    @field_validator("server")
    @classmethod
    def _server_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in flatten_conf(value):
            if not _CONF_KEY.fullmatch(key):
                raise ValueError(f"broker.server[{key!r}]: not a rabbitmq.conf setting name (dot-separated words)")
            if key.startswith(HARNESS_CONF_PREFIXES):
                raise ValueError(
                    f"broker.server[{key!r}] is written by the harness for every node (its listener, cluster "
                    "and user); it cannot be overridden"
                )
            if key.startswith(LISTENER_CONF_PREFIXES):
                raise ValueError(
                    f"broker.server[{key!r}] opens or moves a listener; each node listens on its AMQP and "
                    "distribution ports of the cell's host address only"
                )
        return value

    @field_validator("erl_args")
    @classmethod
    def _erl_args_open_nothing(cls, value: str) -> str:
        problem = erl_args_problem(value.split())
        if problem is not None:
            raise ValueError(f"erl_args: {problem}")
        return value

    @model_validator(mode="after")
    def _fits(self) -> RabbitmqBroker:
        problems = _durability_problems(self) + _replica_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _durability_problems(broker: RabbitmqBroker) -> list[str]:
    if broker.queue_type in _REPLICATED:
        kind = f"queue_type {broker.queue_type!r}"
        return [
            f"broker.{field}: false is not possible with {kind} (it is durable and writes every message to "
            "disk whatever its delivery mode); leave it out or set true"
            for field in ("durable", "persistent")
            if not getattr(broker, field)
        ]
    if broker.persistent and not broker.durable:
        return [
            "broker.persistent: true has no effect on a transient classic queue (RabbitMQ writes a persistent "
            "message to disk only in a durable queue); set broker.durable: true or leave persistent out"
        ]
    return []


def _replica_problems(broker: RabbitmqBroker) -> list[str]:
    if broker.replicas > broker.nodes:
        return [f"broker.replicas {broker.replicas} exceeds broker.nodes {broker.nodes}"]
    if broker.replicas > 1 and broker.queue_type not in _REPLICATED:
        return [
            f"broker.replicas {broker.replicas} needs queue_type 'quorum' or 'stream' (a classic queue lives on "
            "one node; mirroring is not modelled)"
        ]
    return []


class RabbitmqClient(JvmClientSettings):
    """The AMQP 0-9-1 client's behaviour: publisher confirms, consumer acknowledgements and prefetch."""

    confirms: bool = Field(True, description="publisher confirms: each publish is acknowledged by the broker")
    acks: Literal["auto", "manual"] = Field(
        "auto", description="auto: the broker forgets a message once sent; manual: the consumer acks each one"
    )
    prefetch: int = Field(
        0, ge=0, le=65535, description="basic.qos prefetch_count per consumer (0: unlimited); only with acks manual"
    )
    connect: dict[str, Any] = Field(default_factory=dict, description="kwargs of the client's connect(), verbatim")
    max_unconfirmed: int = Field(
        100_000, ge=1, description="publishes per connection awaiting their confirm; beyond it a send is refused"
    )
    max_unwritten_bytes: int = Field(
        64 * 2**20, ge=1, description="bytes pika holds for a connection's socket; beyond it a send is refused"
    )
    DEFAULT_LIBRARY: ClassVar[str] = "pika"
    library: Literal["pika", "java"] = Field(
        "pika",
        description="pika: the Python workers; java: RabbitMQ's Java client (amqp-client, PerfTest's) in the JVM "
        "worker (docs/workers.md)",
    )

    @model_validator(mode="after")
    def _prefetch_needs_acks(self) -> RabbitmqClient:
        if self.prefetch and self.acks == "auto":
            raise ValueError(
                f"client.prefetch {self.prefetch} has no effect with client.acks 'auto' (basic.qos limits only "
                "consumers that acknowledge); set acks: manual or leave prefetch out"
            )
        return self


def check_pair(broker: RabbitmqBroker, client: RabbitmqClient) -> list[str]:
    """Problems only the two models together show (the cell validator calls this): RabbitMQ refuses a stream
    consumer that does not acknowledge manually with a prefetch."""
    if broker.queue_type != "stream":
        return []
    problems = []
    if client.acks != "manual":
        problems.append("client.acks must be 'manual' with broker.queue_type 'stream' (RabbitMQ refuses others)")
    if client.prefetch == 0:
        problems.append("client.prefetch must be at least 1 with broker.queue_type 'stream' (RabbitMQ needs a qos)")
    return problems


def erl_args_problem(flags: list[str]) -> str | None:
    """Why these Erlang VM flags cannot be added to a node's command line, or None. Emulator flags (`+sbwt none`)
    and application settings that open nothing (`-kernel net_ticktime 60`) pass; a later flag wins over the
    harness's own, so one that opens or moves a listener, or runs code, is refused."""
    for flag, param in itertools.pairwise([*flags, ""]):
        if flag in _ERL_REFUSED_FLAGS:
            return f"{flag} runs code, reads more arguments or starts a distribution service, unrecorded by the cell"
        if flag.startswith("-") and _ERL_LISTENER_PARAM.fullmatch(param):
            return (
                f"{flag} {param} opens or moves a listener; each node listens on its AMQP and distribution ports "
                "of the cell's host address only"
            )
    return None


def flatten_conf(settings: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """rabbitmq.conf keys are dotted paths; a nested map in a matrix (`log: {console: {level: debug}}`) is the
    same setting as its dotted key (`log.console.level`)."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_conf(value, f"{path}."))
        else:
            flat[path] = value
    return flat


class RabbitmqCell(CellBase):
    """One fully specified RabbitMQ cell: the route is one queue (behind the chosen exchange) per cell route."""

    SYSTEM: ClassVar[str] = "rabbitmq"
    system: Literal["rabbitmq"]
    broker: RabbitmqBroker = RabbitmqBroker()
    client: RabbitmqClient = RabbitmqClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> RabbitmqCell:
        problems = check_pair(self.broker, self.client) + _cell_problems(self) + java_refusals(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _cell_problems(cell: RabbitmqCell) -> list[str]:
    """What the driver does not (yet) do, refused by field rather than measured as something else."""
    problems = []
    if cell.measurement == "publish" and not cell.client.confirms:
        problems.append("measurement 'publish' needs client.confirms: true (the confirm is the publish's ack)")
    if cell.measurement == "rtt" and cell.broker.queue_type == "stream":
        problems.append("measurement 'rtt' needs a classic or quorum queue (a stream delivers to every reader)")
    if cell.workload.prefill_messages or cell.workload.lagging_consumers:
        problems.append("workload.prefill_messages and lagging_consumers are not built for RabbitMQ cells yet")
    if cell.brokers == "external" and (cell.broker.erl_args or cell.broker.nodes != 1):
        problems.append("broker.erl_args and broker.nodes: external nodes run as they are; leave them out")
    for name, bg in cell.background.items():
        if bg.partitioned_fields_set():
            problems.append(f"background.{name}: {', '.join(bg.partitioned_fields_set())} apply to Kafka only")
    return problems
