"""Kafka's own command-line tools, run as JVMs before or beside the nodes: formatting a KRaft node's storage with
its cluster id (and SCRAM users), and ConfigCommand for a ZooKeeper-era cluster's users. Each runs with the
release's own classpath and a deadline, and a failure quotes the tool's output."""

from __future__ import annotations

import base64
import subprocess
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...brokers.process import BrokerProcess
from ...errors import BrokerError
from ...secrecy import write_secret


@dataclass(frozen=True)
class NodePlan:
    """Where one node of a cluster keeps its files, and the ports it listens on."""

    node_id: int
    port: int
    controller_port: int | None
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


def format_storage(
    java: list[str],
    tool: str,
    plans: list[NodePlan],
    cluster_id: str,
    deadline: float,
    extra: Sequence[str] = (),
) -> None:
    """Format every node's log dir with the release's storage tool (main class `tool`, run by the `java` command
    line), all nodes in parallel; `extra` adds arguments (SCRAM users with their passwords: `--add-scram`). The
    tool's arguments reach it through a private argument file (`java @file`), deleted once it ran: a process's
    command line is readable by every user of the host."""
    procs: dict[int, BrokerProcess] = {}
    try:
        for p in plans:
            args = [tool, "format", "-t", cluster_id, "-c", str(p.properties_path), *extra]
            argfile = write_secret(p.home / "format.args", java_argfile(args))
            procs[p.node_id] = BrokerProcess([*java, f"@{argfile}"], p.home / "format.log")
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
        for p in plans:
            (p.home / "format.args").unlink(missing_ok=True)


def storage_tool(tool: str | None, libs: Path) -> str:
    """The storage tool a KRaft release formats with, as the manifest of its `libs` names it."""
    if tool is None:
        raise BrokerError(f"the manifest of {libs.parent} names no storage tool; delete that folder to fetch it again")
    return tool


def run_tool(java: Sequence[str], main: str, args: Sequence[str], home: Path, deadline: float, what: str) -> None:
    """Run one of the release's command-line tools to its end; its arguments (passwords among them) go through a
    private argument file, deleted once it ran."""
    home.mkdir(parents=True, exist_ok=True)
    argfile = write_secret(home / "tool.args", java_argfile([main, *args]))
    proc = BrokerProcess([*java, f"@{argfile}"], home / "tool.log")
    try:
        code = proc.popen.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired as exc:
        raise BrokerError(f"{what} ({main}) timed out") from exc
    finally:
        proc.stop(grace_s=1.0)
        argfile.unlink(missing_ok=True)
    if code != 0:
        raise BrokerError(f"{what} ({main}) failed ({code}):\n{proc.log_tail(20)}")


def java_argfile(args: Sequence[str]) -> str:
    """`args` as a `java @file` argument file reads them: each quoted, backslash and quote escaped."""
    return " ".join('"' + a.replace("\\", "\\\\").replace('"', '\\"') + '"' for a in args) + "\n"


def new_cluster_id() -> str:
    """A random cluster id in Kafka's Uuid text form (16 bytes, URL-safe base64, no padding). Like Kafka's own
    generator, it never starts with '-', which the storage tool's argument parser would take for an option."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text
