"""Apache Kafka clusters: one to a few nodes on one address (127.0.0.1, or a network-namespace host's), or (KRaft)
each node on an address of its own in a network namespace of its own (`sites`).

Releases from 3.3 on run in KRaft mode (`modes.py`): every node is a combined broker+controller
(`process.roles=broker,controller`) with its own ports and log dir, in a static quorum (`controller.quorum.voters`,
understood from 3.3 to 4.x alike), formatted with a fresh cluster id on every start. Older releases run in
ZooKeeper mode: a ZooKeeper of the release's own (`zookeeper.py`) is started first, on a free port of the same
address, and every node is a broker (`broker.id`, `zookeeper.connect`) that needs no format step; the ZooKeeper
is stopped after the brokers. Settings that matter for a single-host benchmark are defaulted (replication factors
of internal topics fit the cluster size, no group rebalance delay, no topic auto-creation, one offsets partition on
a single node); `server` settings pass through to server.properties untouched and override them.

With `sites` (node id -> (namespace, address): one host per node) every node is forked from a thread inside its own
namespace and binds, advertises and is a quorum voter on its own address, so client, replication and KRaft
traffic to and from a node all cross that node's link (which a `partition` or `bandwidth` fault acts on). The
caller (the harness's side: readiness checks, admin requests) is then in a namespace that reaches every node.
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...brokers.cluster import NodeCluster, stop_nodes, stop_pids
from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess, stopped_on_failure
from ...classdata import use_flags
from ...errors import BrokerError
from ...secrecy import redacted, write_secret
from ...topology.netns import inside
from .admin import admin_client, registered_brokers
from .formatted import copy_formatted, keep_formatted, template_dir
from .jvm import TOOL_JVM_OPTS, default_jvm_opts, java_binary, java_version
from .modes import LAST_NODE_GRACE_S, mode_of
from .properties import render_properties
from .release import VerifiedRelease, class_archive, release_of, version_key
from .security import ListenerSecurity
from .tools import NodePlan, format_storage, new_cluster_id, run_tool, storage_tool
from .zookeeper import MAIN_CLASS as ZOOKEEPER_CLASS
from .zookeeper import ZooKeeper

MAIN_CLASS = "kafka.Kafka"  # also what `stop_pid` looks for in a detached node's command line
CONFIG_TOOL_CLASS = "kafka.admin.ConfigCommand"  # writes SCRAM users into a ZooKeeper-era cluster's ZooKeeper
# One broker: the group coordinator is that broker whichever of the offsets topic's partitions a group hashes to, and
# the harness commits no offsets (`enable.auto.commit` off), so the partition count changes nothing a cell measures.
# Kafka's 50 are created when the first consumer looks for its coordinator; a join that reaches the broker before
# its partition is led is refused as "not coordinator", and librdkafka retries ~2.2 s later: one partition is led
# at once (a Kafka cell's consumers were ready in 0.3 s instead of 2.5 s). With more brokers the count places each
# group's coordinator, which a fault on a node can hit: Kafka's default stays.
_SINGLE_NODE_OFFSETS = "offsets.topic.num.partitions"


# Broker logs go to stdout, which BrokerProcess writes to the node's server.log together with any JVM crash.
# log4j2's own shutdown hook would stop logging at SIGTERM and lose the broker's shutdown story.
_RELOAD4J_CONFIG = """\
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""


_LOG4J2_CONFIG = """\
status = warn
shutdownHook = disable
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
"""


# KRaft nodes (and 3.x brokers) log the first; 2.x ZooKeeper-era brokers only the second.
_STARTED = re.compile(r"Kafka Server started|\[KafkaServer id=\d+\] started")


_VERSION_LINE = re.compile(r"Kafka version: (\S+)")


_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KafkaNode:
    """One combined broker+controller: how to reach it, what it runs, and the exact config it was given."""

    node_id: int
    pid: int
    port: int
    controller_port: int | None  # None: a ZooKeeper-era broker (no KRaft controller listener)
    log_dir: str
    log_path: str
    server_properties: str
    java: str
    jvm: str  # `java -version`, one line


@dataclass(frozen=True)
class KafkaEndpoint:
    """How to reach a running cluster, and what it is. Serialised to the broker state file (`state()`)."""

    bootstrap_servers: str
    version: str
    cluster_id: str
    nodes: tuple[KafkaNode, ...]
    jvm_opts: tuple[str, ...]
    classpath_digest: str  # sha256 of the verified manifest: names the exact jars
    ready_after_s: float  # from the start() call to every broker registered (a fetch, if one was needed, included)
    workdir: str
    security: dict[str, Any] = field(default_factory=lambda: {"protocol": "PLAINTEXT"})  # no secrets in here
    class_data: str | None = None  # the class-data archive offered at start-up (mapped if it fits the JVM)
    mode: str = "kraft"  # or "zookeeper" (releases before 3.3)
    zookeeper: dict[str, Any] | None = None  # ZooKeeper mode: its pid, address, version and log

    @property
    def pids(self) -> dict[int, int]:
        return {node.node_id: node.pid for node in self.nodes}

    @property
    def ports(self) -> dict[int, int]:
        return {node.node_id: node.port for node in self.nodes}


class KafkaCluster(NodeCluster):
    """A cluster of `brokers` nodes for one cell (or one `brokers up`): combined KRaft nodes, on one address or each
    on its own (`sites`), or ZooKeeper-era brokers with their ZooKeeper on one address (`modes.py`).

    1 and 3 nodes are what the harness tests; 3 is the smallest quorum that survives losing a node. `jvm_opts`
    defaults to `default_jvm_opts()`; whatever is used is recorded in the endpoint. `host` is the address every
    listener (client, inter-broker, controller) binds and advertises: 127.0.0.1, or the broker host's address
    when the cluster is started from a thread inside that host's network namespace (so clients in other
    namespaces reach it across the links, and the nodes reach each other on it). `sites`: node id (1..brokers) ->
    (network namespace, address) when each node has a host of its own; `host` is then where the caller reaches
    them from.
    """

    KIND: ClassVar[str] = "Kafka"
    STOP_GRACE_S: ClassVar[float] = 15.0
    # The same as a detached cluster's stop (`Kafka.last_node_grace_s`): the last KRaft voter standing waits 5 s
    # for voters that already exited (a 3-node cluster took 5.6 s to stop instead of ~1.7 s).
    LAST_NODE_GRACE_S: ClassVar[float | None] = LAST_NODE_GRACE_S

    def __init__(
        self,
        version: str,
        brokers: int,
        server: Mapping[str, Any] | None,
        workdir: Path | str,
        tie_to_parent: bool = True,
        *,
        jvm_opts: Sequence[str] | None = None,
        security: str | None = None,
        sasl_mechanism: str | None = None,
        host: str = "127.0.0.1",
        sites: Mapping[int, tuple[str, str]] | None = None,
        copy_formatted_storage: bool = True,
    ):
        """`copy_formatted_storage` False: the storage tool formats every start, even where an earlier one's work
        could be copied (bench_tasks.systems.kafka.formatted; bench/kafka_start.py compares the two)."""
        if brokers < 1:
            raise BrokerError(f"a Kafka cluster needs at least one broker, not {brokers}")
        super().__init__(version, workdir, tie_to_parent, host)
        self.sites = dict(sites) if sites else {i: ("", host) for i in range(1, brokers + 1)}
        if sorted(self.sites) != list(range(1, brokers + 1)):
            raise BrokerError(f"a Kafka cluster's nodes are 1..{brokers}; sites were given for {sorted(self.sites)}")
        self.mode = mode_of(version)
        self.zookeeper = (
            ZooKeeper(self.workdir / "zookeeper", host, tie_to_parent) if self.mode == "zookeeper" else None
        )
        if self.zookeeper is not None and len(set(self.sites.values())) > 1:
            raise BrokerError(f"Kafka {version} runs with ZooKeeper: its nodes share one host, not one each")
        self.security = ListenerSecurity.of(security, sasl_mechanism)
        self.brokers = brokers
        self.server = dict(server or {})
        self.jvm_opts = default_jvm_opts() if jvm_opts is None else tuple(jvm_opts)
        self.endpoint: KafkaEndpoint | None = None
        self.copy_formatted_storage = copy_formatted_storage

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings a client needs on top of `bootstrap.servers` (SASL password included: hand it to
        clients, never record it)."""
        return self.security.client_config(self.workdir)

    def address_of(self, node_id: int) -> str:
        """The address node `node_id` binds and advertises: its own host's, or the cluster's shared one (every node
        has a site: `__init__` fills them)."""
        return self.sites[node_id][1]

    def settings(
        self, node_id: int, port: int, controller_port: int | None, log_dir: Path, quorum: str
    ) -> dict[str, Any]:
        """server.properties of one node: harness defaults, then `server` verbatim on top. `quorum`: the KRaft
        voters, or the ZooKeeper a ZooKeeper-era broker connects to."""
        replicas, min_isr = min(3, self.brokers), min(2, self.brokers)
        me = self.address_of(node_id)
        settings: dict[str, Any] = {
            **self._metadata_settings(node_id, port, controller_port, quorum),
            **self.security.server_settings(port, controller_port, self.workdir, me),
            "log.dirs": str(log_dir),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": False,
        }
        if version_key(self.version) >= (4,):  # share groups (KIP-932) have their own internal topic
            settings["share.coordinator.state.topic.replication.factor"] = replicas
            settings["share.coordinator.state.topic.min.isr"] = min_isr
        if self.brokers == 1:
            settings[_SINGLE_NODE_OFFSETS] = 1
        settings.update(self.server)  # native options pass through untouched
        return settings

    def _metadata_settings(self, node_id: int, port: int, controller_port: int | None, quorum: str) -> dict[str, Any]:
        """Who the node is and where the cluster's metadata lives: a KRaft voter of `quorum`, or a broker of the
        ZooKeeper at `quorum`; its plaintext listener (`client.security` replaces it)."""
        me = self.address_of(node_id)
        plaintext = {"advertised.listeners": f"PLAINTEXT://{me}:{port}", "inter.broker.listener.name": "PLAINTEXT"}
        if self.mode == "zookeeper":
            return {
                "broker.id": node_id,
                "zookeeper.connect": quorum,
                "listeners": f"PLAINTEXT://{me}:{port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                **plaintext,
                # The harness stops every node at once: a broker moving its leaders to brokers that are stopping too
                # waits out its retries (a 3-node 2.4.0 cluster took 9-10 s to stop instead of 2-3 s).
                "controlled.shutdown.enable": False,
            }
        return {
            "process.roles": "broker,controller",
            "node.id": node_id,
            "controller.quorum.voters": quorum,
            "listeners": f"PLAINTEXT://{me}:{port},CONTROLLER://{me}:{controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            **plaintext,
        }

    def start(self, timeout_s: float = 90.0) -> KafkaEndpoint:
        """Fetch (if needed) and verify the release, start its ZooKeeper (ZooKeeper mode) or format fresh storage
        (KRaft), start every node, wait until all are registered brokers. Call it from a thread that outlives the
        cluster: PR_SET_PDEATHSIG fires when the *thread* that started a process exits."""
        timeout_s = with_patience(timeout_s)
        if self.processes:
            raise BrokerError("this Kafka cluster was already started; make a new KafkaCluster")
        began = time.monotonic()
        deadline = began + timeout_s
        release = release_of(self.version)
        java = java_binary()
        plans = self._plan()
        self.security.prepare(self.workdir, *dict.fromkeys(self.address_of(p.node_id) for p in plans))
        cluster_id = new_cluster_id()
        archive = class_archive(release, java)  # start-up only: see bench_tasks.classdata
        mapped = use_flags(archive)
        jvm_common = [*mapped, self._write_logging_config(release.logging), "-cp", f"{release.libs}/*"]
        tool = [java, *TOOL_JVM_OPTS, *jvm_common]
        bootstrap = ",".join(f"{self.address_of(p.node_id)}:{p.port}" for p in plans)
        with stopped_on_failure(self.stop, f"the Kafka {self.version} cluster"):
            quorum = self._start_quorum(java, jvm_common, tool, plans, deadline)
            settings = {
                p.node_id: self.settings(p.node_id, p.port, p.controller_port, p.log_dir, quorum) for p in plans
            }
            properties = {node: render_properties(redacted(values)) for node, values in settings.items()}  # recorded
            for plan in plans:  # JAAS lines hold the listener's passwords
                write_secret(plan.properties_path, render_properties(settings[plan.node_id]))
            if self.zookeeper is None:
                self._format(tool, release, plans, cluster_id, deadline)
            for plan in plans:  # from this thread, see the docstring; forked inside the node's own namespace
                argv = [java, *self.jvm_opts, *jvm_common, MAIN_CLASS, str(plan.properties_path)]
                with inside(self.sites[plan.node_id][0]):
                    self.processes[plan.node_id] = BrokerProcess(argv, plan.log_path, self.tie_to_parent)
            self._wait_ready(bootstrap, plans, deadline, timeout_s)
        self.endpoint = KafkaEndpoint(
            bootstrap_servers=bootstrap,
            version=self.version,
            cluster_id=cluster_id,
            nodes=tuple(self._node_facts(p, properties[p.node_id], java) for p in plans),
            jvm_opts=self.jvm_opts,
            classpath_digest=release.digest,
            class_data=str(archive) if mapped else None,
            ready_after_s=round(time.monotonic() - began, 3),
            workdir=str(self.workdir),
            security=self.security.describe(),
            mode=self.mode,
            zookeeper=self.zookeeper.facts() if self.zookeeper is not None else None,
        )
        return self.endpoint

    def _format(
        self, tool: list[str], release: VerifiedRelease, plans: list[NodePlan], cluster_id: str, deadline: float
    ) -> None:
        """Format every node's storage: a copy of the storage tool's earlier work for this release and these
        settings where the cluster is plaintext (bench_tasks.systems.kafka.formatted), else the tool itself."""
        template = None
        if self.copy_formatted_storage and self.security.protocol == "PLAINTEXT":
            placeholders = {  # the settings without this cluster's ports and folders, which formatting never writes
                p.node_id: render_properties(self.settings(p.node_id, 0, 0, Path("data"), "quorum")) for p in plans
            }
            template = template_dir(release.libs.parent, placeholders)
            if copy_formatted(template, plans, cluster_id):
                return
        main = storage_tool(release.storage_tool, release.libs)
        format_storage(tool, main, plans, cluster_id, deadline, self.security.format_args())
        if template is not None:
            keep_formatted(template, plans, cluster_id)

    def _start_quorum(
        self, java: str, jvm_common: Sequence[str], tool: Sequence[str], plans: list[NodePlan], deadline: float
    ) -> str:
        """Where the nodes keep their metadata: the KRaft voters (the nodes themselves), or a ZooKeeper started now
        (with the SCRAM users a SASL/SCRAM listener needs written into it)."""
        if self.zookeeper is None:
            return ",".join(f"{p.node_id}@{self.address_of(p.node_id)}:{p.controller_port}" for p in plans)
        connect = self.zookeeper.start(java, jvm_common, deadline)
        for i, args in enumerate(self.security.zookeeper_scram_args(connect)):
            run_tool(tool, CONFIG_TOOL_CLASS, args, self.zookeeper.home / f"scram-{i}", deadline, "adding SCRAM users")
        return connect

    def companions(self) -> list[tuple[int, str]]:
        """Processes the nodes need that are not nodes: the ZooKeeper of a ZooKeeper-era cluster."""
        pid = self.zookeeper.pid if self.zookeeper is not None else None
        return [(pid, ZOOKEEPER_CLASS)] if pid is not None else []

    def stop(self, grace_s: float | None = None) -> list[int]:
        """Every node at once (`NodeCluster.stop`), then the ZooKeeper they deregistered from."""
        running = super().stop(grace_s)
        if self.zookeeper is not None:
            self.zookeeper.stop()
        return running

    def _check_alive(self) -> None:
        if self.zookeeper is not None and not self.zookeeper.alive():
            raise BrokerError(
                f"the ZooKeeper of Kafka {self.version} exited during start:\n{self.zookeeper.log_tail(30)}"
            )
        for node_id, proc in self.processes.items():
            if not proc.alive():
                raise BrokerError(
                    f"Kafka {self.version} node {node_id} exited with code {proc.popen.returncode} during start "
                    f"({proc.log_path}):\n{proc.log_tail(40)}"
                )

    def _node_facts(self, plan: NodePlan, properties: str, java: str) -> KafkaNode:
        return KafkaNode(
            node_id=plan.node_id,
            pid=self.processes[plan.node_id].pid,
            port=plan.port,
            controller_port=plan.controller_port,
            log_dir=str(plan.log_dir),
            log_path=str(plan.log_path),
            server_properties=properties,
            java=java,
            jvm=java_version(java),
        )

    def _plan(self) -> list[NodePlan]:
        """Ports (free on each node's address, in its namespace) and fresh folders per node; a node's folder from an
        earlier start is wiped (its cluster id is stale), nothing else in `workdir` is touched."""
        shared = len(set(self.sites.values())) == 1
        ports: list[tuple[int, int | None]]
        if self.zookeeper is not None:  # a broker has no controller listener
            with inside(self.sites[1][0]):
                ports = [(port, None) for port in free_ports(self.brokers, self.address_of(1))]
        elif shared:  # one address: all ports drawn together, so none is handed out twice
            with inside(self.sites[1][0]):
                flat = free_ports(2 * self.brokers, self.address_of(1))
            ports = [(flat[2 * i], flat[2 * i + 1]) for i in range(self.brokers)]
        else:
            ports = []
            for node_id in range(1, self.brokers + 1):
                with inside(self.sites[node_id][0]):
                    client, controller = free_ports(2, self.address_of(node_id))
                ports.append((client, controller))
        plans = []
        for i in range(self.brokers):
            home = self.workdir / f"node-{i + 1}"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            plans.append(NodePlan(i + 1, *ports[i], home))
        return plans

    def _write_logging_config(self, backend: str) -> str:
        """Write the release line's logging config into `workdir`; returns the JVM option that points at it."""
        if backend == "log4j2":
            path = self.workdir / "log4j2.properties"
            path.write_text(_LOG4J2_CONFIG)
            return f"-Dlog4j2.configurationFile={path}"
        path = self.workdir / "log4j.properties"
        path.write_text(_RELOAD4J_CONFIG)
        return f"-Dlog4j.configuration=file:{path}"

    def _wait_ready(self, bootstrap: str, plans: list[NodePlan], deadline: float, timeout_s: float) -> None:
        """Until every node has logged that it started, with the expected version, and the cluster metadata lists
        all node ids as brokers. A node that exits fails the start at once, with its log tail."""
        expected = {p.node_id for p in plans}
        admin = None
        waiting_for = "the nodes to start"
        while time.monotonic() < deadline:
            self._check_alive()
            if admin is None and all(_accepts(self.address_of(p.node_id), p.port) for p in plans):
                admin = admin_client(bootstrap, self.client_config)  # only now: librdkafka logs refused connections
            if admin is not None:
                unstarted = [n for n, proc in self.processes.items() if not _STARTED.search(_read(proc.log_path))]
                registered = registered_brokers(admin)
                if not unstarted and registered == expected:
                    self._check_versions()
                    return
                waiting_for = f"nodes {unstarted} to log that they started" if unstarted else "registration"
                waiting_for += f"; registered brokers {sorted(registered)} of {sorted(expected)}"
            time.sleep(0.1)
        tails = "\n".join(f"--- node {n} ({p.log_path}):\n{p.log_tail(15)}" for n, p in self.processes.items())
        raise BrokerError(
            f"Kafka {self.version} cluster not ready after {timeout_s:.0f}s, waiting for {waiting_for}\n{tails}"
        )

    def _check_versions(self) -> None:
        """The jars are keyed by version, but the broker's own word is what gets recorded; they must agree."""
        for node_id, proc in self.processes.items():
            found = _VERSION_LINE.search(_read(proc.log_path))
            reported = found.group(1) if found else "unknown"
            if reported != self.version:
                raise BrokerError(f"Kafka node {node_id} reports version {reported}, expected {self.version}")


def stop_detached(state: Mapping[str, Any], grace_s: float = 15.0) -> list[int]:
    """Stop the nodes of a detached cluster (from `KafkaCluster.state()`) by PID, all at once, then its ZooKeeper;
    each PID is checked to be a `kafka.Kafka` (or ZooKeeper) JVM before it is signalled. Returns the node PIDs that
    were running."""
    stopped = stop_nodes(state, MAIN_CLASS, grace_s)
    zookeeper = state.get("zookeeper")
    if zookeeper:
        stop_pids([int(zookeeper["pid"])], ZOOKEEPER_CLASS, 5.0)
    return stopped


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""
