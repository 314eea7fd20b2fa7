"""redis-server nodes for one cell: a single server, or a primary (node 1) with replicas (nodes 2…N+1, `replicaof`).

Each node listens on a free port of the cell's host address, has its own folder (`n<i>/`: generated redis.conf, log,
data) under the workdir the caller gives, and runs in the foreground under the harness (`daemonize no`, never the
system service). A node is ready when PING answers (not while it loads its append-only file), a replica only when
it also reports `master_link_status:up`, and the primary when it sees every replica online. The time from start to
ready is recorded. Every node asks for the cell's password (`requirepass`: the matrix's, or a random one), its
replicas give it to their primary (`masterauth`), and MODULE and DEBUG are renamed away, so no other user of the
host can reach the data or run code as the harness's user. The config file holds the password, so it is private
(`secrecy.write_secret`); the context records it redacted. `protected-mode` is on for a loopback address and off for
a network-namespace address, where clients in other namespaces connect from the harness's own private network.

Redis replication has no election here (no Sentinel, no Cluster): node 1 is the primary while its process lives;
after it is killed no node leads (replicas keep their data but refuse writes) until it is restarted.
"""

from __future__ import annotations

import ipaddress
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import psutil
import redis

from ...brokers.cluster import NodeCluster, stop_nodes
from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess, kill_and_wait
from ...errors import BrokerError
from ...releases import version_key
from ...secrecy import login_url, redacted, write_secret
from .release import server_binary
from .settings import DISABLED_COMMANDS, RedisBroker, ServerValue, directive_values

PRIMARY = 1
PROCESS_NAME = "redis-server"
CONFIG_NAME = "redis.conf"
# INFO server fields that say which server this is; the context keeps them as the server reported them.
INFO_SERVER_FIELDS = ("redis_version", "redis_git_sha1", "redis_build_id", "redis_mode", "arch_bits", "gcc_version")
# Effective settings that change what a reply or a loss means, read back with CONFIG GET after start.
EFFECTIVE_CONFIG = (
    "appendonly",
    "appendfsync",
    "save",
    "maxmemory",
    "maxmemory-policy",
    "client-output-buffer-limit",
    "repl-diskless-sync",
    "repl-backlog-size",
    "io-threads",
    "hz",
)


def render_config(directives: Mapping[str, ServerValue]) -> str:
    """redis.conf text: one `directive value` line per entry (a list gives one line per item)."""
    lines: list[str] = []
    for key, value in directives.items():
        for item in value if isinstance(value, list) else [value]:
            lines.append(f"{key} {_conf_value(item)}")
    return "\n".join(lines) + "\n"


def _conf_value(value: ServerValue) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    return '""' if text == "" else text


def node_directives(
    broker: RedisBroker,
    host: str,
    port: int,
    folder: Path,
    primary_port: int | None,
    password: str,
    renamed_away: Sequence[str] = DISABLED_COMMANDS,
    follow: str = "replicaof",
) -> dict[str, ServerValue]:
    """The config of one node: harness-owned directives, defaults a matrix may override, then `broker.server`.

    `primary_port` is None for the primary (or the single server), else the port this replica follows (with the
    directive `follow`: `slaveof` before Redis 5.0). `password`: what every client must AUTH with (`requirepass`),
    and what a replica gives its primary (`masterauth`); the commands that load code into the server or poke its
    memory are renamed away (`renamed_away`: those the release has; renaming one it lacks stops it at start)."""
    owned: dict[str, ServerValue] = {
        "bind": host,
        "port": port,
        "daemonize": False,
        "protected-mode": ipaddress.ip_address(host).is_loopback,
        "dir": str(folder),
        "logfile": "",
        "appendonly": broker.appendonly,
        "requirepass": password,
    }
    if broker.appendonly:
        owned["appendfsync"] = broker.fsync
    if primary_port is not None:
        owned[follow] = f"{host} {primary_port}"
        owned["masterauth"] = password
    # No RDB snapshots unless asked (`server: {save: …}`); a replica starts syncing at once instead of waiting
    # 5 s for more replicas to share the transfer.
    defaults: dict[str, ServerValue] = {"save": "", "repl-diskless-sync-delay": 0}
    renamed = [f'{command} ""' for command in renamed_away] + directive_values(broker.server.get("rename-command", []))
    return {**owned, **defaults, **broker.server, "rename-command": renamed}


def cell_password(broker: RedisBroker) -> str:
    """The password of a cell's servers: the matrix's own `requirepass`, else a random one for this start."""
    given = broker.server.get("requirepass")
    return str(given) if given is not None else secrets.token_urlsafe(24)


@dataclass(frozen=True)
class RedisNode:
    """One server: how to reach it, its role, the exact config it was given and what it reported."""

    index: int
    role: str  # "primary" or "replica"
    pid: int
    port: int
    url: str
    config: str
    log_path: str
    started_after_s: float  # from process start to ready (PING, and the replica link up)
    server: dict[str, str]  # INFO server fields (INFO_SERVER_FIELDS) and mem_allocator, as reported
    effective: dict[str, str]  # CONFIG GET of EFFECTIVE_CONFIG


@dataclass(frozen=True)
class RedisEndpoint:
    """How to reach the servers (the primary's URL), and what they are. Serialised by `state()`."""

    url: str
    version: str
    mode: str
    fsync: str
    replicas: int
    nodes: tuple[RedisNode, ...]
    ready_after_s: float  # from start() to every node ready
    workdir: str


def control_client(host: str, port: int, password: Any = None, timeout_s: float = 1.0) -> redis.Redis:
    """A short-timeout synchronous client for readiness and facts (never on a measured path). RESP2, which every
    release speaks (redis-py's default, RESP3, starts with HELLO, which Redis before 6.0 does not know)."""
    return redis.Redis(
        host=host, port=port, password=password, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, protocol=2
    )


def replication_info(client: redis.Redis) -> dict[str, Any]:
    return client.info("replication")


class RedisServers(NodeCluster):
    """A redis-server, or a primary with replicas, for one cell (or one `brokers up`), on `host`. A server of the
    Redis family that speaks the same protocol and reads the same config (Valkey) subclasses it, naming its
    binary, its process and the INFO field that carries its own version."""

    KIND: ClassVar[str] = "Redis"
    STOP_GRACE_S: ClassVar[float] = 10.0
    PROCESS_NAME: ClassVar[str] = PROCESS_NAME
    VERSION_FIELD: ClassVar[str] = "redis_version"  # the INFO server field with the release's own version
    INFO_FIELDS: ClassVar[tuple[str, ...]] = INFO_SERVER_FIELDS
    # The first release of what the config names: MODULE (renamed away) came in 4.0, `replicaof` in 5.0
    # (`slaveof` before). Releases of another numbering (Valkey's) have both.
    COMMAND_SINCE: ClassVar[Mapping[str, str]] = {"MODULE": "4.0.0"}
    REPLICAOF_SINCE: ClassVar[str] = "5.0.0"

    @staticmethod
    def binary(version: str) -> Path:
        """The verified server binary of `version` (fetched into the cache on first use)."""
        return server_binary(version)

    @staticmethod
    def resolve(version: str) -> str:
        """`latest` or a line -> the release it names now (the system's release list); a release as it is."""
        from . import REDIS

        return REDIS.resolve_version(version)

    def __init__(
        self,
        version: str,
        broker: RedisBroker,
        workdir: Path | str,
        tie_to_parent: bool = True,
        host: str = "127.0.0.1",
    ):
        super().__init__(self.resolve(version), workdir, tie_to_parent, host)
        self.broker = broker
        self.ports: dict[int, int] = {}
        self.endpoint: RedisEndpoint | None = None
        self.password = cell_password(broker)  # clients get it through the brokers' client settings (secret)
        self._configs: dict[int, str] = {}  # each node's config as recorded (the password redacted)

    def start(self, timeout_s: float = 30.0) -> RedisEndpoint:
        """Start every node and return once all are ready. Call it from a thread that outlives the servers:
        PR_SET_PDEATHSIG fires when the *thread* that started a process exits."""
        timeout_s = with_patience(timeout_s)
        if self.processes:
            raise BrokerError("these Redis servers were already started; make a new RedisServers")
        began = time.monotonic()
        binary = self.binary(self.version)
        count = 1 + self.broker.replicas
        self.ports = dict(enumerate(free_ports(count, self.host), start=1))
        try:
            nodes = [self._start_node(binary, PRIMARY, began + timeout_s)]
            launched = {i: self._launch(binary, i) for i in range(2, count + 1)}
            nodes += [self._await_node(i, at, began + timeout_s) for i, at in launched.items()]
            self._await_replicas_online(began + timeout_s)
        except BaseException:
            self.stop()
            raise
        self.endpoint = RedisEndpoint(
            url=self.url(PRIMARY),
            version=nodes[0].server[self.VERSION_FIELD],
            mode=self.broker.mode,
            fsync=self.broker.fsync,
            replicas=self.broker.replicas,
            nodes=tuple(nodes),
            ready_after_s=round(time.monotonic() - began, 3),
            workdir=str(self.workdir),
        )
        self._check_versions()
        return self.endpoint

    def url(self, index: int) -> str:
        return f"redis://{self.host}:{self.ports[index]}"

    def login_url(self, index: int = PRIMARY) -> str:
        """Node `index`'s URL with the cell's password, for a client outside the harness (a benchmark's own);
        never recorded."""
        return login_url(self.url(index), None, self.password)

    def folder(self, index: int) -> Path:
        return self.workdir / f"n{index}"

    def _launch(self, binary: Path, index: int) -> float:
        """Write node `index`'s config into a fresh folder and start its process; returns when it started."""
        folder = self.folder(index)
        shutil.rmtree(folder, ignore_errors=True)  # a stale AOF or RDB would load another run's data
        folder.mkdir(parents=True)
        primary_port = None if index == PRIMARY else self.ports[PRIMARY]
        directives = node_directives(
            self.broker, self.host, self.ports[index], folder, primary_port, self.password, *self._release_config()
        )
        write_secret(folder / CONFIG_NAME, render_config(directives))  # it holds the password
        self._configs[index] = render_config(redacted(directives))
        started = time.monotonic()
        argv = [str(binary), str(folder / CONFIG_NAME)]
        self.processes[index] = BrokerProcess(argv, folder / "redis.log", self.tie_to_parent)
        return started

    def _release_config(self) -> tuple[list[str], str]:
        """What this release's config names: the disabled commands it has, and how a replica follows."""
        release = version_key(self.version)
        renamed = [c for c in DISABLED_COMMANDS if release >= version_key(self.COMMAND_SINCE.get(c, "0"))]
        return renamed, "replicaof" if release >= version_key(self.REPLICAOF_SINCE) else "slaveof"

    def _start_node(self, binary: Path, index: int, deadline: float) -> RedisNode:
        return self._await_node(index, self._launch(binary, index), deadline)

    def _await_node(self, index: int, started: float, deadline: float) -> RedisNode:
        """Wait until node `index` is ready, then describe it."""
        client = control_client(self.host, self.ports[index], self.password)
        try:
            self._wait(index, deadline, lambda: _answers(client), "PING")
            if index != PRIMARY and self.leader() is not None:  # a replica of a killed primary cannot link
                self._wait(index, deadline, lambda: _linked(client), "master_link_status:up")
            ready_s = round(time.monotonic() - started, 3)
            return self._describe(index, client, ready_s)
        finally:
            client.close()

    def _wait(self, index: int, deadline: float, ready: Callable[[], bool], what: str) -> None:
        proc = self.processes[index]
        while time.monotonic() < deadline:
            if not proc.alive():
                raise BrokerError(f"{self.PROCESS_NAME} node {index} exited during start:\n{proc.log_tail()}")
            if ready():
                return
            time.sleep(0.02)
        raise BrokerError(f"{self.PROCESS_NAME} node {index}: no {what} before the start timeout:\n{proc.log_tail()}")

    def _await_replicas_online(self, deadline: float) -> None:
        """The primary sees every replica online (its side of the link, after the replicas' own `up`)."""
        if not self.broker.replicas:
            return
        client = control_client(self.host, self.ports[PRIMARY], self.password)
        try:
            self._wait(PRIMARY, deadline, lambda: _online_replicas(client) >= self.broker.replicas, "replicas online")
        finally:
            client.close()

    def _describe(self, index: int, client: redis.Redis, ready_s: float) -> RedisNode:
        info = client.info("server")
        facts = {key: str(info.get(key, "")) for key in self.INFO_FIELDS}
        facts["mem_allocator"] = str(client.info("memory").get("mem_allocator", ""))
        every = client.config_get("*")  # Redis 6.2 takes one pattern per CONFIG GET
        effective = {key: _text(every.get(key, "")) for key in EFFECTIVE_CONFIG}
        proc = self.processes[index]
        return RedisNode(
            index=index,
            role="primary" if index == PRIMARY else "replica",
            pid=proc.pid,
            port=self.ports[index],
            url=self.url(index),
            config=self._configs[index],
            log_path=str(proc.log_path),
            started_after_s=ready_s,
            server=facts,
            effective=effective,
        )

    def _check_versions(self) -> None:
        assert self.endpoint is not None
        reported = {node.index: node.server[self.VERSION_FIELD] for node in self.endpoint.nodes}
        if set(reported.values()) != {self.version}:
            self.stop()
            raise BrokerError(f"{self.PROCESS_NAME} nodes report versions {reported}, expected {self.version}")

    # The broker-control protocol beyond NodeCluster's pause/resume/stop.

    def kill(self, node_id: int) -> None:
        """SIGKILL one node and any child it forked (an RDB save or AOF rewrite), which would outlive it."""
        proc = self._node(node_id)
        children = _children(proc.pid)
        proc.kill()
        kill_and_wait(children)

    def restart(self, node_id: int, timeout_s: float = 30.0) -> RedisNode:
        """Start node `node_id` again on its port, folder and config (stopping it first if it still runs).
        What it comes back with is Redis's business: its AOF if persistence is on, else an empty dataset."""
        timeout_s = with_patience(timeout_s)
        old = self._node(node_id)
        old.stop(self.STOP_GRACE_S)
        began = time.monotonic()
        self.processes[node_id] = BrokerProcess(old.argv, old.log_path, self.tie_to_parent)
        node = self._await_node(node_id, began, began + timeout_s)
        if self.endpoint is not None:
            nodes = tuple(node if n.index == node_id else n for n in self.endpoint.nodes)
            self.endpoint = replace(self.endpoint, nodes=nodes)
        return node

    def leader(self, route: str | None = None) -> int | None:
        """The node writes go to, for every route: the primary while its process lives (see module docstring)."""
        proc = self.processes.get(PRIMARY)
        return PRIMARY if proc is not None and proc.alive() else None

    def alive(self) -> dict[int, bool]:
        return {index: proc.alive() for index, proc in self.processes.items()}

    def context(self) -> dict[str, Any]:
        """What the cell records: the version and facts as the servers reported them at start, the exact config
        of every node, pids and ports. Read from the start, so it never waits on a frozen node."""
        if self.endpoint is None:
            raise BrokerError("the Redis servers have not been started")
        e = self.endpoint
        return {
            "version": e.version,
            "mode": e.mode,
            "fsync": e.fsync,
            "replicas": e.replicas,
            "ready_after_s": e.ready_after_s,
            "nodes": [asdict(node) for node in e.nodes],
        }

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.processes.values()]

    def logs(self) -> list[Path]:
        return [proc.log_path for proc in self.processes.values()]


def stop_detached(state: Mapping[str, Any], grace_s: float = RedisServers.STOP_GRACE_S) -> list[int]:
    """Stop servers started with tie_to_parent=False, from their `state()`; each PID is checked to be a
    redis-server before it is signalled. Returns the PIDs that were running."""
    return stop_nodes(state, PROCESS_NAME, grace_s)


def _answers(client: redis.Redis) -> bool:
    """PING answers (a server loading its AOF replies LOADING, which is not ready)."""
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def _linked(client: redis.Redis) -> bool:
    try:
        return replication_info(client).get("master_link_status") == "up"
    except redis.RedisError:
        return False


def _online_replicas(client: redis.Redis) -> int:
    try:
        info = replication_info(client)
    except redis.RedisError:
        return 0
    slaves = [value for key, value in info.items() if key.startswith("slave") and isinstance(value, dict)]
    return sum(1 for slave in slaves if slave.get("state") == "online")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _children(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
