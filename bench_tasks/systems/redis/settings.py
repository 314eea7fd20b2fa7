"""Redis broker and client settings: only what the harness needs, native options passed through (STYLE 2).

`mode` picks what a message is: `pubsub` (PUBLISH to a channel, fire-and-forget: a subscriber that is not
connected, or too slow for its output buffer, simply never gets it, so loss is counted) or `streams` (XADD to a
stream trimmed with `MAXLEN ~`, read by a consumer group with XREADGROUP and XACK; the XADD reply is the
acknowledgement that `publish` measures). Persistence (`appendonly`, `appendfsync`) is recorded with every cell
because it changes what that reply means: with `appendfsync always` an entry is on disk before the reply, with
`everysec` up to a second of replies can be lost on a crash, without the append-only file everything is.
`server:` lines go into the generated redis.conf, `connect:` into redis-py's connection kwargs, untouched. Every
provisioned server asks for a password: `server: {requirepass: …}` when the matrix sets one, else a random one per
cell; the harness's clients get it through the brokers' client settings, and no record shows it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...spec.base import StrictModel
from ...spec.cell import BrokerSettings, CellBase, JvmClientSettings
from ...spec.features import predates
from .jvm_client import java_refusals

Mode = Literal["pubsub", "streams"]
Fsync = Literal["always", "everysec", "no"]
ServerValue = str | int | float | bool | list[str | int]
MAX_REPLICAS = 4
# Commands a client could use to run code as the harness's user (MODULE LOAD) or read and corrupt the server's
# memory (DEBUG): renamed to nothing in every node. Redis 7 disables both by default; 6.2 has no such switch.
DISABLED_COMMANDS = ("MODULE", "DEBUG")

_ONE_LISTENER = "each node listens on one free port of the cell's host address, and nowhere else"
_OWN_ADDRESS = "each node is reached at, and connects from, the cell's host address"

# redis.conf directives the harness writes itself, and why a matrix may not: each node's address, port and
# folder are chosen per start (and no directive opens another listener or announces another address), the server
# must stay in the foreground under the harness's process control, and persistence and replication have fields of
# their own so that they are recorded. Redis reads directive names in any case.
HARNESS_DIRECTIVES: dict[str, str] = {
    "bind": "each node listens on the cell's host address",
    "port": "each node gets a free port",
    **dict.fromkeys(("tls-port", "unixsocket", "unixsocketperm", "cluster-enabled", "cluster-port"), _ONE_LISTENER),
    **dict.fromkeys(
        (
            "bind-source-addr",
            "replica-announce-ip",
            "replica-announce-port",
            "slave-announce-ip",
            "slave-announce-port",
            "cluster-announce-ip",
            "cluster-announce-port",
            "cluster-announce-tls-port",
            "cluster-announce-bus-port",
            "cluster-announce-hostname",
        ),
        _OWN_ADDRESS,
    ),
    "daemonize": "the harness owns the server process (daemonize no)",
    "supervised": "the harness owns the server process",
    "pidfile": "the harness tracks the server by its process",
    "logfile": "the log goes to the node's folder",
    "dir": "each node has its own folder",
    "include": "the config is generated whole",
    "protected-mode": "set from the host address (yes on loopback)",
    "replicaof": "use broker.replicas",
    "slaveof": "use broker.replicas",
    "appendonly": "use broker.appendonly",
    "appendfsync": "use broker.appendfsync",
    "masterauth": "a replica authenticates with the cell's password (requirepass)",
    "user": "the harness's clients log in as the default user, with requirepass",
    "aclfile": "the harness's clients log in as the default user, with requirepass",
    "enable-module-command": "MODULE is disabled in every node (no client loads code into the server)",
    "enable-debug-command": "DEBUG is disabled in every node",
    "loadmodule": "the server loads no module (the harness measures Redis itself)",
}

# redis-py connection kwargs the harness sets itself: the address comes from the broker, and payloads are bytes.
HARNESS_CONNECT: dict[str, str] = {
    "host": "the address comes from the broker",
    "port": "the address comes from the broker",
    "unix_socket_path": "the address comes from the broker",
    "decode_responses": "payloads are bytes",
    "parser_class": "the hiredis parser is the client under test",
    "protocol": "the harness reads RESP2 replies (pub/sub messages as arrays)",
}


class RedisStream(StrictModel):
    """The stream of `streams` mode: how long it may grow, and the consumer group that reads it."""

    maxlen: int | None = Field(
        100_000,
        gt=0,
        description="XADD MAXLEN ~ N: trim to about N entries (memory ≈ N × message size); null: never trim. An "
        "entry trimmed before the group read it is lost, and counted as lost",
    )
    group: str = Field("sixnines", pattern=r"^[A-Za-z0-9_.:-]+$", description="consumer group name")


class RedisBroker(BrokerSettings):
    """redis-server settings of one cell: one server, or a primary with `replicas` replicas (`replicaof`)."""

    mode: Mode = "pubsub"
    appendonly: bool = Field(False, description="the append-only file (AOF); off: nothing survives a restart")
    appendfsync: Fsync | None = Field(
        None, description="AOF fsync policy (needs appendonly): always, everysec (Redis's default) or no"
    )
    replicas: int = Field(0, ge=0, le=MAX_REPLICAS, description="0: a single server; N: a primary and N replicas")
    stream: RedisStream = RedisStream()
    server: dict[str, ServerValue] = Field(default_factory=dict, description="extra redis.conf directives, verbatim")

    @field_validator("server")
    @classmethod
    def _native_only(cls, value: dict[str, ServerValue]) -> dict[str, ServerValue]:
        for key in value:
            reason = HARNESS_DIRECTIVES.get(key.lower())
            if reason is not None:
                raise ValueError(f"server.{key}: set by the harness ({reason})")
            if not key.replace("-", "").isalnum():
                raise ValueError(f"server.{key}: not a redis.conf directive name")
        for entry in directive_values(value.get("rename-command", [])):
            if str(entry).split()[0].upper() in DISABLED_COMMANDS:
                raise ValueError(
                    f"server.rename-command: {str(entry).split()[0]} is renamed away in every node (no client "
                    "loads code into the server or reads its memory)"
                )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RedisBroker:
        if self.appendfsync is not None and not self.appendonly:
            raise ValueError(f"appendfsync {self.appendfsync!r} needs appendonly: true (no AOF, nothing to fsync)")
        if self.stream != RedisStream() and self.mode != "streams":  # defaults pass: a dump validates again
            raise ValueError("stream: settings of mode 'streams'; this broker's mode is 'pubsub'")
        return self

    @property
    def fsync(self) -> str:
        """What an acknowledged write survives: `off` (no AOF), else the AOF fsync policy in effect."""
        if not self.appendonly:
            return "off"
        return self.appendfsync or "everysec"


class RedisClient(JvmClientSettings):
    """redis-py (asyncio, hiredis parser) settings. `connect` is handed to each connection untouched."""

    DEFAULT_LIBRARY: ClassVar[str] = "redis-py"
    library: Literal["redis-py", "java"] = Field(
        "redis-py",
        description="redis-py: the Python workers; java: Lettuce, a Java client, in the JVM worker (docs/workers.md)",
    )

    connect: dict[str, Any] = Field(default_factory=dict, description="redis-py Connection kwargs, verbatim")
    read_count: int = Field(128, ge=1, description="streams: XREADGROUP COUNT, entries per read at most")
    block_ms: int = Field(1000, ge=1, description="streams: XREADGROUP BLOCK, how long an idle read waits")
    noack: bool = Field(False, description="streams: XREADGROUP NOACK (no pending entries, no XACK)")

    @field_validator("connect")
    @classmethod
    def _not_harness_owned(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            reason = HARNESS_CONNECT.get(key)
            if reason is not None:
                raise ValueError(f"connect.{key}: set by the harness ({reason})")
        return value


def directive_values(value: ServerValue) -> list[ServerValue]:
    """A directive's values: a list gives one config line each, anything else one line."""
    return list(value) if isinstance(value, list) else [value]


def measurement_problem(broker: RedisBroker, measurement: str) -> str | None:
    """Why `measurement` cannot run on `broker`, naming the field; None when it can. For the cell's validator."""
    if measurement == "publish" and broker.mode != "streams":
        return (
            "measurement 'publish' needs broker.mode 'streams': a PUBLISH reply only counts the subscribers it "
            "reached; pub/sub has no acknowledgement (the XADD reply is one)"
        )
    if measurement == "rtt" and broker.mode != "pubsub":
        return "measurement 'rtt' is request/reply over pub/sub (seed 000); use broker.mode 'pubsub'"
    return None


class RedisCell(CellBase):
    """One fully specified Redis cell: the route is one channel (pubsub) or one stream and its group (streams)."""

    SYSTEM: ClassVar[str] = "redis"
    # The first release with streams (XADD, consumer groups); a streams cell on an older one is refused. None: every
    # release of the system has them.
    STREAMS_SINCE: ClassVar[str | None] = "5.0.0"
    system: Literal["redis"]
    broker: RedisBroker = RedisBroker()
    client: RedisClient = RedisClient()

    @model_validator(mode="after")
    def _measurement_fits(self) -> RedisCell:
        problems = cell_problems(self) + java_refusals(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def cell_problems(cell: RedisCell) -> list[str]:
    """What Redis or the driver cannot do, refused by field rather than measured as something else."""
    b, w = cell.broker, cell.workload
    problems = [p for p in [measurement_problem(b, cell.measurement), release_problem(cell)] if p]
    if b.mode == "pubsub":
        # Every subscriber of a channel gets every message: several would each count it (duplicates), and several
        # rtt responders would all answer one request.
        role = "responders" if cell.measurement == "rtt" else "subscribers"
        if w.consumers > 1:
            problems.append(
                f"workload.consumers {w.consumers}: pub/sub delivers every message to every subscriber, so the "
                f"{role} would each get it; use 1 (or broker.mode 'streams', whose group shares the messages)"
            )
        if cell.measurement == "chain" and w.relays > 1:
            problems.append(f"workload.relays {w.relays}: pub/sub gives every relay every message; use 1")
    if w.prefill_messages or w.lagging_consumers:
        problems.append("workload.prefill_messages and lagging_consumers are not built for Redis cells yet")
    if cell.brokers == "external":
        for field, default in (("appendonly", False), ("appendfsync", None), ("replicas", 0)):
            if getattr(b, field) != default:  # by value, not fields set: a dump must validate again
                problems.append(f"broker.{field}: an external Redis runs as it is configured; leave it out")
    for name, bg in cell.background.items():
        if bg.partitioned_fields_set():
            problems.append(f"background.{name}: {', '.join(bg.partitioned_fields_set())} apply to Kafka only")
    return problems


def release_problem(cell: RedisCell) -> str | None:
    """What the cell's release (exact, or a line all of whose releases do) lacks for its mode."""
    first = cell.STREAMS_SINCE
    if cell.broker.mode != "streams" or first is None or not predates(cell.version, first):
        return None
    return (
        f"broker.mode 'streams': {cell.SYSTEM} {cell.version} predates streams (first in {first}); use mode "
        "'pubsub' or a later release"
    )
