"""Apache Kafka in KRaft mode: any release from Maven Central, one to a few combined nodes on one address
(127.0.0.1, or a network-namespace host's).

Why jars from Maven Central and not the release tarball: Central is the artefact store the harness can always
reach, and it keeps every release. The runtime classpath of `org.apache.kafka:kafka_2.13:<version>` is resolved
by Maven into `<cache>/kafka/<version>/libs/`, plus the logging backend the pom leaves out (the tarball ships
reload4j for 3.x and log4j2 for 4.x; without one the broker would log nothing). A manifest of jar names and
sha256 digests is written with the jars and checked before every use, so a truncated or tampered jar is
reported by name instead of surfacing as a ClassNotFoundError in the middle of a benchmark.

Every node is a combined broker+controller (`process.roles=broker,controller`) with its own ports and log dir,
in a static quorum (`controller.quorum.voters`, understood by 3.9 and 4.x alike), formatted with a fresh cluster
id on every start. Settings that matter for a single-host benchmark are defaulted (replication factors of
internal topics fit the cluster size, no group rebalance delay, no topic auto-creation); `server` settings pass
through to server.properties untouched and override them.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic, TopicMetadata

from ..errors import BrokerError
from ..maven import copy_dependencies
from ..paths import cache_dir
from .cluster import NodeCluster, free_ports, stop_nodes
from .process import BrokerProcess

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
KAFKA_ARTIFACT = "org.apache.kafka:kafka_2.13"
MAIN_CLASS = "kafka.Kafka"  # also what `stop_pid` looks for in a detached node's command line

# Same heap and GC flags as Kafka's own kafka-server-start.sh / kafka-run-class.sh: a fixed 1 GiB heap never
# resizes during a measurement, and three nodes (3 GiB) fit a 24 GiB host with room for the generator.
DEFAULT_HEAP_OPTS: tuple[str, ...] = ("-Xms1g", "-Xmx1g")
DEFAULT_GC_OPTS: tuple[str, ...] = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
# The storage tool runs for a second; a small heap and the C1 compiler alone start it faster.
_TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

# Where each release line keeps its storage tool; the first class found in the jars is recorded in the manifest.
_STORAGE_TOOL_CLASSES = ("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool")

# Logging backends the Kafka tarballs ship but the pom does not bring (Maven coordinates, per release line).
_RELOAD4J = ("org.slf4j:slf4j-reload4j:1.7.36", "ch.qos.reload4j:reload4j:1.2.25")
_LOG4J2 = ("org.apache.logging.log4j:log4j-slf4j-impl:2.24.3", "org.apache.logging.log4j:log4j-core:2.24.3")

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

_MANIFEST_VERSION = 1  # 1: version, artifact, logging, storage_tool, jars {name: sha256}, fetched_at
_METADATA_MAX_AGE_S = 24 * 3600
_MVN_TIMEOUT_S = 1800
_STARTED_MARKER = "Kafka Server started"
_VERSION_LINE = re.compile(r"Kafka version: (\S+)")

_log = logging.getLogger(__name__)
_librdkafka_log = logging.getLogger(f"{__name__}.librdkafka")


# --- releases and the classpath cache ---------------------------------------------------------------------


def available_versions(max_age_s: float = _METADATA_MAX_AGE_S) -> list[str]:
    """Releases of kafka_2.13 listed on Maven Central, newest first (the answer is cached for `max_age_s`).

    Listed is not the same as complete: a release can be listed before all its modules are published (4.4.0's
    kafka-tools-api was missing when this was written), in which case `kafka_classpath` names the missing jar.
    An unreachable Central falls back to the cached list, however old.
    """
    cached = cache_dir() / "kafka" / "maven-metadata.xml"
    fresh = cached.exists() and time.time() - cached.stat().st_mtime < max_age_s
    if not fresh:
        try:
            _download(f"{MAVEN_CENTRAL}/{_artifact_path(KAFKA_ARTIFACT)}/maven-metadata.xml", cached)
        except OSError as exc:
            if not cached.exists():
                raise BrokerError(f"cannot list Kafka releases on Maven Central: {exc}") from exc
            _log.warning("Maven Central unreachable (%s); using the cached release list", exc)
    try:
        root = ET.fromstring(cached.read_text())
    except ET.ParseError as exc:
        cached.unlink(missing_ok=True)
        raise BrokerError(f"Maven Central sent an unreadable maven-metadata.xml: {exc}") from exc
    versions = {v.text.strip() for v in root.iterfind("./versioning/versions/version") if v.text}
    return sorted(versions, key=_version_key, reverse=True)


def kafka_classpath(version: str, refetch: bool = False) -> Path:
    """The verified `libs/` folder of `version` (run with `-cp 'libs/*'`), fetched on first use or when `refetch`.

    Verification failures raise BrokerError naming the jar; `refetch=True` (or deleting the version's folder)
    replaces the folder atomically with a fresh download.
    """
    return _release(version, refetch).libs


@dataclass(frozen=True)
class _Release:
    """A verified release in the cache: what a node needs to run it."""

    libs: Path
    storage_tool: str  # main class of the storage formatter
    logging: str  # "log4j2" or "reload4j": which config file the JVM is pointed at
    digest: str  # sha256 of the manifest, so of the exact jar set


def _release(version: str, refetch: bool = False) -> _Release:
    home = _release_dir(version)
    if refetch or not home.exists():
        _fetch(version, home)
    manifest = _verify(home, version)
    digest = _sha256_bytes((home / "manifest.json").read_bytes())
    return _Release(home / "libs", manifest["storage_tool"], manifest["logging"], digest)


def _release_dir(version: str) -> Path:
    if not re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", version):
        raise BrokerError(f"not a Kafka version: {version!r}")
    return cache_dir() / "kafka" / version


def _fetch(version: str, home: Path) -> None:
    """Resolve the classpath with Maven into a temporary folder next to `home`, then rename it into place."""
    home.parent.mkdir(parents=True, exist_ok=True)
    print(f"fetching Kafka {version} from Maven Central into {home} (mvn; this takes a while)", file=sys.stderr)
    began = time.monotonic()
    build = Path(tempfile.mkdtemp(prefix=f".{version}-fetch-", dir=home.parent))
    try:
        libs = build / "libs"
        _copy_dependencies(version, build / "pom", libs)
        shutil.rmtree(build / "pom")
        manifest = _make_manifest(version, libs)
        (build / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        _install(build, home)
    finally:
        shutil.rmtree(build, ignore_errors=True)
    size_mb = sum(p.stat().st_size for p in (home / "libs").iterdir()) / 1e6
    took = time.monotonic() - began
    print(f"fetched Kafka {version}: {len(manifest['jars'])} jars, {size_mb:.0f} MB in {took:.1f}s", file=sys.stderr)


def _copy_dependencies(version: str, pom_dir: Path, libs: Path, coordinates: Sequence[str] = ()) -> None:
    """`mvn dependency:copy-dependencies` on a generated pom: the release's runtime scope plus a logging backend
    (or the given `coordinates` instead)."""
    pom_dir.mkdir(parents=True)
    coordinates = list(coordinates) or [f"{KAFKA_ARTIFACT}:{version}", *_logging_backend(version)[1]]
    (pom_dir / "pom.xml").write_text(_pom(coordinates))
    copy_dependencies(pom_dir / "pom.xml", libs, _MVN_TIMEOUT_S, f"Kafka {version}", BrokerError)


def _pom(coordinates: Iterable[str]) -> str:
    deps = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency>\n"
        for g, a, v in (c.split(":") for c in coordinates)
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n<modelVersion>4.0.0</modelVersion>\n'
        "<groupId>sixnines</groupId><artifactId>kafka-runtime</artifactId><version>0</version>"
        f"<packaging>pom</packaging>\n<dependencies>\n{deps}</dependencies>\n</project>\n"
    )


def _logging_backend(version: str) -> tuple[str, tuple[str, ...]]:
    """Kafka 4 moved from log4j 1 (reload4j in the tarball) to log4j2; both bind slf4j 1.7, which the pom brings."""
    return ("log4j2", _LOG4J2) if _version_key(version) >= (4,) else ("reload4j", _RELOAD4J)


def _make_manifest(version: str, libs: Path) -> dict[str, Any]:
    jars = {p.name: _sha256_file(p) for p in sorted(libs.glob("*.jar"))}
    if f"kafka_2.13-{version}.jar" not in jars:
        raise BrokerError(f"Maven resolved no kafka_2.13-{version}.jar into {libs}")
    logging_name, logging_coords = _logging_backend(version)
    return {
        "manifest_version": _MANIFEST_VERSION,
        "version": version,
        "artifact": f"{KAFKA_ARTIFACT}:{version}",
        "logging": logging_name,
        "logging_artifacts": list(logging_coords),
        "storage_tool": _find_storage_tool(libs),
        "jars": jars,
        "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _find_storage_tool(libs: Path) -> str:
    """The storage tool's class differs between release lines; look for each known name in the jars."""
    wanted = {name.replace(".", "/") + ".class": name for name in _STORAGE_TOOL_CLASSES}
    found: set[str] = set()
    for jar in libs.glob("*.jar"):
        with zipfile.ZipFile(jar) as archive:
            found.update(wanted[entry] for entry in archive.namelist() if entry in wanted)
    for name in _STORAGE_TOOL_CLASSES:
        if name in found:
            return name
    raise BrokerError(f"no Kafka storage tool ({', '.join(_STORAGE_TOOL_CLASSES)}) in the jars of {libs}")


def _install(build: Path, home: Path) -> None:
    """Rename the finished folder into place; a replaced folder is moved aside first and then deleted."""
    old = None
    if home.exists():
        old = home.with_name(f".{home.name}-old-{uuid.uuid4().hex[:8]}")
        home.rename(old)
    try:
        build.rename(home)
    except OSError:
        if not home.exists():
            raise
        # Another process installed the same release meanwhile; its copy is verified like ours would be.
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _verify(home: Path, version: str) -> dict[str, Any]:
    """Check every jar against the manifest: none missing, none extra (`libs/*` would load it), digests equal."""
    refetch = f"re-fetch with kafka_classpath({version!r}, refetch=True) or delete {home}"
    manifest_path = home / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        jars: dict[str, str] = manifest["jars"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BrokerError(
            f"Kafka {version} cache has no readable manifest ({manifest_path}): {exc}; {refetch}"
        ) from exc
    if manifest.get("version") != version or manifest.get("manifest_version") != _MANIFEST_VERSION:
        raise BrokerError(
            f"{manifest_path} is not a version {_MANIFEST_VERSION} manifest of Kafka {version}; {refetch}"
        )
    libs = home / "libs"
    present = {p.name for p in libs.glob("*.jar")}
    problems = [f"missing {name}" for name in sorted(set(jars) - present)]
    problems += [f"unexpected {name}" for name in sorted(present - set(jars))]
    problems += [f"sha256 mismatch {n}" for n in sorted(set(jars) & present) if _sha256_file(libs / n) != jars[n]]
    if problems:
        raise BrokerError(f"Kafka {version} classpath {libs} failed verification: {'; '.join(problems)}; {refetch}")
    return manifest


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with urllib.request.urlopen(url, timeout=30) as resp:
        data = resp.read()
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    partial.write_bytes(data)
    partial.rename(target)


def _artifact_path(artifact: str) -> str:
    group, name = artifact.split(":")
    return f"{group.replace('.', '/')}/{name}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


# --- listener security ------------------------------------------------------------------------------------

_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
CLIENT_USER = "sixnines"  # the SASL user clients log in as; brokers log in to each other as "admin"


@dataclass(frozen=True)
class ListenerSecurity:
    """The client listener's security protocol (a matrix axis: `client.security`) and how a node sets it up.

    Inter-broker traffic uses the same listener and protocol, so replication pays what clients pay (as in a
    secured production cluster); the KRaft controller listener stays plaintext on loopback. TLS: a CA and a
    server certificate for 127.0.0.1/localhost are made at start (`tls.make_tls`) into the cluster's folder
    and used as PEM keystore/truststore. SASL: PLAIN users live in the listener's JAAS config; SCRAM users are
    written into the metadata when the storage is formatted (`--add-scram`). Passwords are random per start."""

    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)
    client_password: str = field(default_factory=lambda: secrets.token_urlsafe(16), repr=False)

    @classmethod
    def of(cls, security: str | None, mechanism: str | None) -> ListenerSecurity:
        protocol = (security or "plaintext").upper()
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise BrokerError(f"client.security {security!r}: expected plaintext, ssl, sasl_plaintext or sasl_ssl")
        sasl = protocol.startswith("SASL")
        if mechanism is not None and mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise BrokerError(f"client.sasl_mechanism {mechanism!r}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
        return cls(protocol, (mechanism or "PLAIN") if sasl else None)

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @staticmethod
    def _tls_dir(workdir: Path) -> Path:
        return workdir / "tls"

    def prepare(self, workdir: Path, host: str = "127.0.0.1") -> None:
        """Make the TLS material (once per start) before any node's config points at it; the certificate
        names `host` (the listeners' address) besides localhost and 127.0.0.1."""
        if self.tls:
            from .tls import make_tls

            make_tls(self._tls_dir(workdir), tuple(dict.fromkeys(("localhost", "127.0.0.1", host))))

    def server_settings(
        self, port: int, controller_port: int, workdir: Path, host: str = "127.0.0.1"
    ) -> dict[str, Any]:
        if self.protocol == "PLAINTEXT":
            return {}
        settings: dict[str, Any] = {
            "listeners": f"CLIENT://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"CLIENT://{host}:{port}",
            "listener.security.protocol.map": f"CLIENT:{self.protocol},CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "CLIENT",
        }
        if self.tls:
            tls = self._tls_dir(workdir)
            settings |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(tls / "server.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(tls / "ca.pem"),
            }
        if self.mechanism is not None:
            prefix = f"listener.name.client.{self.mechanism.lower()}.sasl.jaas.config"
            if self.mechanism == "PLAIN":
                jaas = (
                    f'{_PLAIN_LOGIN} required username="admin" password="{self.admin_password}" '
                    f'user_admin="{self.admin_password}" user_{CLIENT_USER}="{self.client_password}";'
                )
            else:
                jaas = f'{_SCRAM_LOGIN} required username="admin" password="{self.admin_password}";'
            settings |= {
                "sasl.enabled.mechanisms": self.mechanism,
                "sasl.mechanism.inter.broker.protocol": self.mechanism,
                prefix: jaas,
            }
        return settings

    def format_args(self) -> list[str]:
        """SCRAM credentials for the storage tool: they must be in the metadata before the brokers start."""
        if self.mechanism is None or not self.mechanism.startswith("SCRAM"):
            return []
        users = (("admin", self.admin_password), (CLIENT_USER, self.client_password))
        return [arg for name, pw in users for arg in ("--add-scram", f"{self.mechanism}=[name={name},password={pw}]")]

    def client_config(self, workdir: Path) -> dict[str, str]:
        if self.protocol == "PLAINTEXT":
            return {}
        config = {"security.protocol": self.protocol}
        if self.tls:
            config["ssl.ca.location"] = str(self._tls_dir(workdir) / "ca.pem")
        if self.mechanism is not None:
            config |= {
                "sasl.mechanism": self.mechanism,
                "sasl.username": CLIENT_USER,
                "sasl.password": self.client_password,
            }
        return config

    def describe(self) -> dict[str, Any]:
        """What the context records: protocol, mechanism, user, where TLS came from; never a password."""
        if self.protocol == "PLAINTEXT":
            return {"protocol": "PLAINTEXT"}
        facts: dict[str, Any] = {"protocol": self.protocol, "inter_broker": f"same listener ({self.protocol})"}
        if self.tls:
            facts["tls"] = "PEM CA + server certificate (listener address, 127.0.0.1, localhost) by `cryptography`"
        if self.mechanism is not None:
            facts |= {"sasl_mechanism": self.mechanism, "sasl_username": CLIENT_USER}
        return facts


# --- the cluster ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KafkaNode:
    """One combined broker+controller: how to reach it, what it runs, and the exact config it was given."""

    node_id: int
    pid: int
    port: int
    controller_port: int
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

    @property
    def pids(self) -> dict[int, int]:
        return {node.node_id: node.pid for node in self.nodes}

    @property
    def ports(self) -> dict[int, int]:
        return {node.node_id: node.port for node in self.nodes}


@dataclass(frozen=True)
class _NodePlan:
    node_id: int
    port: int
    controller_port: int
    home: Path

    @property
    def log_dir(self) -> Path:
        return self.home / "data"

    @property
    def properties_path(self) -> Path:
        return self.home / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"


class KafkaCluster(NodeCluster):
    """A KRaft cluster of `brokers` combined nodes for one cell (or one `brokers up`), all on one address.

    1 and 3 nodes are what the harness tests; 3 is the smallest quorum that survives losing a node. `jvm_opts`
    defaults to `default_jvm_opts()`; whatever is used is recorded in the endpoint. `host` is the address every
    listener (client, inter-broker, controller) binds and advertises: 127.0.0.1, or the broker host's address
    when the cluster is started from a thread inside that host's network namespace (so clients in other
    namespaces reach it across the links, and the nodes reach each other on it).
    """

    KIND: ClassVar[str] = "Kafka"
    STOP_GRACE_S: ClassVar[float] = 15.0

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
    ):
        if brokers < 1:
            raise BrokerError(f"a Kafka cluster needs at least one broker, not {brokers}")
        super().__init__(version, workdir, tie_to_parent, host)
        self.security = ListenerSecurity.of(security, sasl_mechanism)
        self.brokers = brokers
        self.server = dict(server or {})
        self.jvm_opts = default_jvm_opts() if jvm_opts is None else tuple(jvm_opts)
        self.endpoint: KafkaEndpoint | None = None

    @property
    def client_config(self) -> dict[str, str]:
        """librdkafka settings a client needs on top of `bootstrap.servers` (SASL password included: hand it to
        clients, never record it)."""
        return self.security.client_config(self.workdir)

    def settings(self, node_id: int, port: int, controller_port: int, log_dir: Path, voters: str) -> dict[str, Any]:
        """server.properties of one node: harness defaults, then `server` verbatim on top."""
        replicas, min_isr = min(3, self.brokers), min(2, self.brokers)
        settings: dict[str, Any] = {
            "process.roles": "broker,controller",
            "node.id": node_id,
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{self.host}:{port},CONTROLLER://{self.host}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            **self.security.server_settings(port, controller_port, self.workdir, self.host),
            "log.dirs": str(log_dir),
            "offsets.topic.replication.factor": replicas,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": False,
        }
        if _version_key(self.version) >= (4,):  # share groups (KIP-932) have their own internal topic
            settings["share.coordinator.state.topic.replication.factor"] = replicas
            settings["share.coordinator.state.topic.min.isr"] = min_isr
        settings.update(self.server)  # native options pass through untouched
        return settings

    def start(self, timeout_s: float = 90.0) -> KafkaEndpoint:
        """Fetch (if needed) and verify the release, format fresh storage, start every node, wait until all are
        registered brokers. Call it from a thread that outlives the cluster: PR_SET_PDEATHSIG fires when the
        *thread* that started a process exits."""
        if self.processes:
            raise BrokerError("this Kafka cluster was already started; make a new KafkaCluster")
        began = time.monotonic()
        deadline = began + timeout_s
        release = _release(self.version)
        java = _java()
        plans = self._plan()
        voters = ",".join(f"{p.node_id}@{self.host}:{p.controller_port}" for p in plans)
        self.security.prepare(self.workdir, self.host)
        settings = {p.node_id: self.settings(p.node_id, p.port, p.controller_port, p.log_dir, voters) for p in plans}
        properties = {node: render_properties(redacted(values)) for node, values in settings.items()}  # recorded
        for plan in plans:
            plan.properties_path.touch(mode=0o600)
            plan.properties_path.write_text(render_properties(settings[plan.node_id]))
        cluster_id = new_cluster_id()
        jvm_common = [self._write_logging_config(release.logging), "-cp", f"{release.libs}/*"]
        bootstrap = ",".join(f"{self.host}:{p.port}" for p in plans)
        try:
            tool = [java, *_TOOL_JVM_OPTS, *jvm_common, release.storage_tool]
            _format_storage(tool, plans, cluster_id, deadline, self.security.format_args())
            for plan in plans:  # from this thread, see the docstring
                argv = [java, *self.jvm_opts, *jvm_common, MAIN_CLASS, str(plan.properties_path)]
                self.processes[plan.node_id] = BrokerProcess(argv, plan.log_path, self.tie_to_parent)
            self._wait_ready(bootstrap, plans, deadline, timeout_s)
        except BaseException:
            self.stop()
            raise
        self.endpoint = KafkaEndpoint(
            bootstrap_servers=bootstrap,
            version=self.version,
            cluster_id=cluster_id,
            nodes=tuple(self._node_facts(p, properties[p.node_id], java) for p in plans),
            jvm_opts=self.jvm_opts,
            classpath_digest=release.digest,
            ready_after_s=round(time.monotonic() - began, 3),
            workdir=str(self.workdir),
            security=self.security.describe(),
        )
        return self.endpoint

    def _node_facts(self, plan: _NodePlan, properties: str, java: str) -> KafkaNode:
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

    def _plan(self) -> list[_NodePlan]:
        """Ports and fresh folders per node; a node's folder from an earlier start is wiped (its cluster id is
        stale), nothing else in `workdir` is touched."""
        ports = free_ports(2 * self.brokers, self.host)
        plans = []
        for i in range(self.brokers):
            home = self.workdir / f"node-{i + 1}"
            shutil.rmtree(home, ignore_errors=True)
            home.mkdir(parents=True)
            plans.append(_NodePlan(i + 1, ports[2 * i], ports[2 * i + 1], home))
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

    def _wait_ready(self, bootstrap: str, plans: list[_NodePlan], deadline: float, timeout_s: float) -> None:
        """Until every node has logged that it started, with the expected version, and the cluster metadata lists
        all node ids as brokers. A node that exits fails the start at once, with its log tail."""
        expected = {p.node_id for p in plans}
        admin = None
        waiting_for = "the nodes to start"
        while time.monotonic() < deadline:
            self._check_alive()
            if admin is None and all(_accepts(self.host, p.port) for p in plans):
                admin = _admin(bootstrap, self.client_config)  # only now: librdkafka logs refused connections
            if admin is not None:
                unstarted = [n for n, proc in self.processes.items() if _STARTED_MARKER not in _read(proc.log_path)]
                registered = _registered_brokers(admin)
                if not unstarted and registered == expected:
                    self._check_versions()
                    return
                waiting_for = f"nodes {unstarted} to log {_STARTED_MARKER!r}" if unstarted else "registration"
                waiting_for += f"; registered brokers {sorted(registered)} of {sorted(expected)}"
            time.sleep(0.1)
        tails = "\n".join(f"--- node {n} ({p.log_path}):\n{p.log_tail(15)}" for n, p in self.processes.items())
        raise BrokerError(
            f"Kafka {self.version} cluster not ready after {timeout_s:.0f}s, waiting for {waiting_for}\n{tails}"
        )

    def _check_alive(self) -> None:
        for node_id, proc in self.processes.items():
            if not proc.alive():
                raise BrokerError(
                    f"Kafka {self.version} node {node_id} exited with code {proc.popen.returncode} during start "
                    f"({proc.log_path}):\n{proc.log_tail(40)}"
                )

    def _check_versions(self) -> None:
        """The jars are keyed by version, but the broker's own word is what gets recorded; they must agree."""
        for node_id, proc in self.processes.items():
            found = _VERSION_LINE.search(_read(proc.log_path))
            reported = found.group(1) if found else "unknown"
            if reported != self.version:
                raise BrokerError(f"Kafka node {node_id} reports version {reported}, expected {self.version}")


def stop_detached(state: Mapping[str, Any], grace_s: float = 15.0) -> list[int]:
    """Stop the nodes of a detached cluster (from `KafkaCluster.state()`) by PID, all at once; each PID is checked
    to be a `kafka.Kafka` JVM before it is signalled. Returns the PIDs that were running."""
    return stop_nodes(state, MAIN_CLASS, grace_s)


def _format_storage(
    tool: list[str], plans: list[_NodePlan], cluster_id: str, deadline: float, extra: Sequence[str] = ()
) -> None:
    """Format every node's log dir with the release's storage tool (`tool` is its java command line), all nodes
    in parallel; `extra` adds arguments (SCRAM users: `--add-scram`)."""
    procs = {
        p.node_id: BrokerProcess(
            [*tool, "format", "-t", cluster_id, "-c", str(p.properties_path), *extra], p.home / "format.log"
        )
        for p in plans
    }
    try:
        for node_id, proc in procs.items():
            try:
                code = proc.popen.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired as exc:
                raise BrokerError(f"formatting Kafka node {node_id} storage timed out") from exc
            if code != 0:
                raise BrokerError(f"formatting Kafka node {node_id} storage failed ({code}):\n{proc.log_tail(20)}")
    finally:
        for proc in procs.values():
            proc.stop(grace_s=1.0)


def redacted(settings: Mapping[str, Any]) -> dict[str, Any]:
    """`settings` with every secret (passwords, JAAS configs that embed them) replaced, for the record."""
    secret = ("password", "jaas")
    return {k: "<redacted>" if any(word in str(k).lower() for word in secret) else v for k, v in settings.items()}


def render_properties(settings: Mapping[str, Any]) -> str:
    """server.properties text. Values are written as Kafka parses them (booleans lower-case, lists
    comma-joined); backslashes, line breaks and key separators are escaped as java.util.Properties requires."""
    return "".join(
        f"{_escape(str(key), key=True)}={_escape(_config_value(value))}\n" for key, value in settings.items()
    )


def _config_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(_config_value(v) for v in value)
    return str(value)


def _escape(text: str, key: bool = False) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        text = re.sub(r"([=: #!])", r"\\\1", text)
    elif text.startswith(" "):
        text = "\\" + text
    return text


def new_cluster_id() -> str:
    """A random cluster id in Kafka's Uuid text form (16 bytes, URL-safe base64, no padding). Like Kafka's own
    generator, it never starts with '-', which the storage tool's argument parser would take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def default_jvm_opts() -> tuple[str, ...]:
    """Kafka's own heap and GC defaults; `$KAFKA_HEAP_OPTS` replaces the heap flags, as it does for
    kafka-server-start.sh, so a host with less memory can shrink the brokers without code changes."""
    heap = os.environ.get("KAFKA_HEAP_OPTS", "").split()
    return (*(heap or DEFAULT_HEAP_OPTS), *DEFAULT_GC_OPTS)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise BrokerError("no `java` on PATH (and no JAVA_HOME); Kafka needs a JVM (17+ for Kafka 4)")
    return found


@cache
def java_version(java: str) -> str:
    """`java -version` on one line, recorded with every node: the JVM is part of what was measured."""
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    return "; ".join(line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip())


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


# --- topics ------------------------------------------------------------------------------------------------


def _admin(bootstrap: str, client: Mapping[str, Any] | None = None) -> AdminClient:
    """An AdminClient whose librdkafka log goes to Python logging instead of stderr (refused connections to a
    killed node are expected in fault tests); `client` adds security settings (TLS, SASL)."""
    return AdminClient({"bootstrap.servers": bootstrap, **(client or {}), "logger": _librdkafka_log})


def _registered_brokers(admin: AdminClient) -> set[int]:
    try:
        described = admin.describe_cluster(request_timeout=2).result(timeout=3)
    except (KafkaException, TimeoutError):  # not reachable yet, or no controller elected yet
        return set()
    return {node.id for node in described.nodes} if described.controller is not None else set()


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = 30.0,
    client: Mapping[str, Any] | None = None,
) -> None:
    """Create a topic (topic `config`, e.g. min.insync.replicas, passed through) and wait until every partition
    has a leader and a full ISR, so a measurement never starts against a topic that is still settling."""
    admin = _admin(bootstrap, client)
    topic_config = {str(k): _config_value(v) for k, v in (config or {}).items()}
    new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=topic_config)
    try:
        admin.create_topics([new], request_timeout=timeout_s)[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"could not create topic {name!r}: {exc.args[0]}") from exc

    def settled(metadata: TopicMetadata | None) -> bool:
        if metadata is None:
            return False
        parts = metadata.partitions
        return len(parts) == partitions and all(
            p.leader >= 0 and len(p.isrs) == replication_factor for p in parts.values()
        )

    _wait_for_topic(admin, name, settled, timeout_s, "every partition to have a leader and a full ISR")


def partition_leaders(
    bootstrap: str, topic: str, timeout_s: float = 10.0, client: Mapping[str, Any] | None = None
) -> dict[int, int]:
    """Partition → leader node id (-1: no leader), as the metadata of a live broker says now."""
    metadata = _topic_metadata(_admin(bootstrap, client), topic, timeout_s)
    if metadata is None:
        raise BrokerError(f"topic {topic!r} not found in the metadata of {bootstrap}")
    return {p.id: p.leader for p in sorted(metadata.partitions.values(), key=lambda p: p.id)}


def delete_topic(bootstrap: str, name: str, timeout_s: float = 30.0, client: Mapping[str, Any] | None = None) -> None:
    """Delete a topic and wait until the metadata no longer lists it, so its name can be reused at once."""
    admin = _admin(bootstrap, client)
    try:
        admin.delete_topics([name], request_timeout=timeout_s)[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"could not delete topic {name!r}: {exc.args[0]}") from exc
    _wait_for_topic(admin, name, lambda metadata: metadata is None, timeout_s, "the topic to disappear")


def _topic_metadata(admin: AdminClient, topic: str, timeout_s: float) -> TopicMetadata | None:
    """The topic's metadata, or None if the cluster does not (yet, or any more) know it."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"no metadata from the cluster: {exc.args[0]}") from exc
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else found


def _wait_for_topic(
    admin: AdminClient, name: str, done: Callable[[TopicMetadata | None], bool], timeout_s: float, what: str
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = _topic_metadata(admin, name, max(1.0, deadline - time.monotonic()))
        if done(metadata):
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topic {name!r}: timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


# --- what a running cluster reports about itself -------------------------------------------------------------

# Kafka's wire protocol carries no software version; what a cluster does report is its features (KIP-584), and
# `metadata.version` names the release line (`4.3-IV0`: Kafka 4.3). Kafka's own `kafka-features.sh describe`
# (org.apache.kafka.tools.FeatureCommand, Admin API DescribeFeatures) reads them. It lives in the kafka-tools
# artifact, which the broker's classpath does not bring, so that artifact's runtime classpath is fetched once with
# Maven into `<cache>/kafka-tools/<version>/` (about 85 jars, 43 MB; a sha256 manifest checked before every use),
# from the newest release the harness knows, so it can name every level the clusters it meets report.
TOOLS_ARTIFACT = "org.apache.kafka:kafka-tools"
FEATURE_TOOL_CLASS = "org.apache.kafka.tools.FeatureCommand"
_FEATURE_LINE = re.compile(r"(\w+):\s*(\S+)")
_RELEASE_LINE = re.compile(r"^(\d+\.\d+)-IV\d+$")
_JAAS_MODULE = {"PLAIN": _PLAIN_LOGIN, "SCRAM-SHA-256": _SCRAM_LOGIN, "SCRAM-SHA-512": _SCRAM_LOGIN}


def tools_classpath(version: str) -> Path:
    """The verified `libs/` folder of kafka-tools `version` (fetched with Maven on first use)."""
    if not re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", version):
        raise BrokerError(f"not a Kafka version: {version!r}")
    home = cache_dir() / "kafka-tools" / version
    if not home.exists():
        home.parent.mkdir(parents=True, exist_ok=True)
        print(f"fetching {TOOLS_ARTIFACT}:{version} from Maven Central into {home} (mvn)", file=sys.stderr)
        build = Path(tempfile.mkdtemp(prefix=f".{version}-fetch-", dir=home.parent))
        try:
            libs = build / "libs"
            _copy_dependencies(version, build / "pom", libs, [f"{TOOLS_ARTIFACT}:{version}"])
            shutil.rmtree(build / "pom")
            manifest = {
                "manifest_version": _MANIFEST_VERSION,
                "version": version,
                "artifact": f"{TOOLS_ARTIFACT}:{version}",
                "jars": {p.name: _sha256_file(p) for p in sorted(libs.glob("*.jar"))},
                "fetched_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            (build / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            _install(build, home)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    _verify(home, version)
    return home / "libs"


def reported_version(
    bootstrap: str, client: Mapping[str, Any] | None = None, timeout_s: float = 90.0
) -> dict[str, Any]:
    """The cluster's own word on what it runs: `version` is the release line of the newest `metadata.version` its
    brokers support (SupportedMaxVersion), beside the finalized level and every feature as the tool printed it.
    `client` holds librdkafka security settings; they are translated for the Java tool into a 0600 file that
    is deleted at once. Raises BrokerError when the cluster cannot be asked."""
    from ..systems.kafka.settings import KAFKA_VERSIONS

    tool_version = KAFKA_VERSIONS[0]
    libs = tools_classpath(tool_version)
    java = _java()
    with tempfile.TemporaryDirectory(prefix="sixnines-features-") as tmp:
        config = Path(tmp) / "client.properties"
        config.touch(mode=0o600)
        config.write_text(render_properties(java_client_properties(client or {})))
        cmd = [
            java,
            *_TOOL_JVM_OPTS,
            "-cp",
            f"{libs}/*",
            FEATURE_TOOL_CLASS,
            "--bootstrap-server",
            bootstrap,
            "--command-config",
            str(config),
            "describe",
        ]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise BrokerError(
                f"{FEATURE_TOOL_CLASS} describe got no answer from {bootstrap} in {timeout_s:.0f}s"
            ) from exc
    if done.returncode != 0:
        raise BrokerError(f"{FEATURE_TOOL_CLASS} describe against {bootstrap} failed: {done.stderr.strip()[-500:]}")
    features = parse_features(done.stdout)
    metadata = features.get("metadata.version", {})
    line = _RELEASE_LINE.match(metadata.get("SupportedMaxVersion", ""))
    return {
        "version": line.group(1) if line else "unknown",
        "version_source": f"metadata.version SupportedMaxVersion from {FEATURE_TOOL_CLASS} describe (kafka-tools "
        f"{tool_version}, Admin API DescribeFeatures): Kafka reports its release line, not the patch",
        "metadata_version": metadata,
        "features": features,
    }


def parse_features(text: str) -> dict[str, dict[str, str]]:
    """`Feature: metadata.version\\tSupportedMinVersion: 3.0-IV1\\tSupportedMaxVersion: 3.9-IV0…` lines → a map."""
    features: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        fields = dict(_FEATURE_LINE.findall(line))
        name = fields.pop("Feature", None)
        if name:
            features[name] = fields
    return features


def java_client_properties(client: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka security settings as the Java client spells them (JAAS for SASL, a PEM truststore for TLS)."""
    props: dict[str, str] = {}
    if "security.protocol" in client:
        props["security.protocol"] = str(client["security.protocol"])
    mechanism = client.get("sasl.mechanism") or client.get("sasl.mechanisms")
    if mechanism:
        props["sasl.mechanism"] = str(mechanism)
        user, password = client.get("sasl.username", ""), client.get("sasl.password", "")
        props["sasl.jaas.config"] = f'{_JAAS_MODULE[str(mechanism)]} required username="{user}" password="{password}";'
    if client.get("ssl.ca.location"):
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(client["ssl.ca.location"])}
    return props
