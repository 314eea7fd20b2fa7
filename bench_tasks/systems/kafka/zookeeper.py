"""The ZooKeeper a ZooKeeper-era Kafka cluster (releases before 3.3, `modes.py`) keeps its metadata in: one standalone
server per cluster, run from the release's own classpath (the `org.apache.zookeeper` version that release was built
and tested with, which Maven resolved into its `libs/`), on a free port of the cluster's address, with its config
and data under the cluster's workdir.

It is started before the brokers and stopped after them (a broker shutting down deregisters itself in ZooKeeper,
and one that cannot reach it waits). The broker-control protocol knows it as a companion (`StartedBrokers
.companions`): it is never a fault's target, it is watched like the nodes while a cell runs (its exit fails the
cell), and a detached cluster's stop ends it by PID after the nodes.
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess
from ...errors import BrokerError
from .properties import render_properties

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"  # a config without peers runs it standalone
# ZooKeeper's own start script gives it 1 GiB; a cluster's metadata for a benchmark needs little, and the brokers'
# heaps matter more on a small host. The JMX log4j bean is off: Kafka's log4j 1 backend (reload4j) would not
# change what it logs, and ZooKeeper 3.5 warns when it cannot register it.
JVM_OPTS: tuple[str, ...] = (
    "-Xms256m",
    "-Xmx256m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-Dzookeeper.jmx.log4j.disable=true",
)
_READY = b"imok"
_VERSION = re.compile(r"zookeeper\.version=([0-9][^-,\s]*)")


class ZooKeeper:
    """One standalone ZooKeeper server in `home`, listening on `host`."""

    def __init__(self, home: Path, host: str, tie_to_parent: bool = True):
        self.home = home
        self.host = host
        self.tie_to_parent = tie_to_parent
        self.port = 0
        self.process: BrokerProcess | None = None

    @property
    def connect(self) -> str:
        """What the brokers' `zookeeper.connect` says (a chroot-free host:port)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.home / "zookeeper.log"

    def config(self) -> dict[str, object]:
        """zoo.cfg: a fresh data dir, the client port on the cluster's address only, no admin HTTP server (it
        would take port 8080), and the `ruok` command that readiness asks."""
        return {
            "dataDir": str(self.home / "data"),
            "clientPort": self.port,
            "clientPortAddress": self.host,
            "tickTime": 2000,
            "initLimit": 10,
            "syncLimit": 5,
            "maxClientCnxns": 0,
            "admin.enableServer": False,
            "4lw.commands.whitelist": "ruok,srvr",
        }

    def start(self, java: str, jvm_common: Sequence[str], deadline: float) -> str:
        """Start the server (`jvm_common`: the release's classpath and logging flags) and return once it answers
        `ruok`; BrokerError with its log tail when it exits or does not answer by `deadline`."""
        if self.process is not None:
            raise BrokerError("this ZooKeeper was already started")
        self.home.mkdir(parents=True, exist_ok=True)
        (self.port,) = free_ports(1, self.host)
        cfg = self.home / "zoo.cfg"
        cfg.write_text(render_properties(self.config()))
        argv = [java, *JVM_OPTS, *jvm_common, MAIN_CLASS, str(cfg)]
        self.process = BrokerProcess(argv, self.log_path, self.tie_to_parent)
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise BrokerError(
                    f"ZooKeeper exited with code {self.process.popen.returncode} during start ({self.log_path}):\n"
                    f"{self.process.log_tail(30)}"
                )
            if four_letter(self.host, self.port, b"ruok") == _READY:
                return self.connect
            time.sleep(0.1)
        raise BrokerError(f"ZooKeeper on {self.connect} did not answer 'ruok' ({self.log_path}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        return self.process.log_tail(lines) if self.process else ""

    def facts(self) -> dict[str, Any]:
        """What the cell records of it: pid, address, the ZooKeeper version it logged, its config and log."""
        found = _VERSION.search(self.log_path.read_text(errors="replace")) if self.log_path.exists() else None
        return {
            "pid": self.pid,
            "connect": self.connect,
            "version": found.group(1) if found else "unknown",
            "config": render_properties(self.config()),
            "log_path": str(self.log_path),
        }

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def stop(self, grace_s: float = 5.0) -> None:
        if self.process is not None:
            self.process.stop(grace_s)


def four_letter(host: str, port: int, word: bytes, timeout_s: float = 1.0) -> bytes | None:
    """ZooKeeper's answer to a four-letter command (`ruok` -> `imok`), or None when it does not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word)
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks)
    except OSError:
        return None
