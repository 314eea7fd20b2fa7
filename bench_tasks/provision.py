"""Provision the brokers a cell needs, behind one small interface the runner and fault injection use.

NATS: one nats-server, or a 3-node JetStream cluster (`broker.servers: 3`) whose faults hit the node that leads
the cell's stream. Kafka: a KRaft cluster of 1 or 3 nodes; faults hit the broker that leads partition 0 when
the fault fires (a leader failure is what seeds 001 and 003 study). Leaders (Kafka partitions, the NATS stream
as partition 0) are watched for the whole cell so every change lands with the results.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from .drivers import Target
from .matrix import Cell, KafkaCell, NatsCell


class Provisioned(Protocol):
    address: str

    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def kill(self) -> None: ...
    def stop(self) -> None: ...
    def context(self) -> dict[str, Any]: ...
    def pids(self) -> list[int]: ...
    def logs(self) -> list[Path]: ...
    def watch_leaders(self) -> None: ...
    def leader_changes(self) -> list[dict[str, int]]: ...


class NatsProvisioned:
    def __init__(self, cell: NatsCell, workdir: Path, tie_to_parent: bool, host: str = "127.0.0.1"):
        from .brokers.nats import NatsServer

        self.server = NatsServer(cell.version, cell.broker, workdir, tie_to_parent, host)
        self.endpoint = self.server.start()
        self.address = self.endpoint.url
        self.workdir = workdir

    def pause(self) -> None:
        self.server.pause()

    def resume(self) -> None:
        self.server.resume()

    def kill(self) -> None:
        self.server.kill()

    def stop(self) -> None:
        self.server.stop()

    def context(self) -> dict[str, Any]:
        e = self.endpoint
        return {"version": e.version, "mode": e.mode, "config": e.config, "pid": e.pid}

    def pids(self) -> list[int]:
        return [self.endpoint.pid]

    def logs(self) -> list[Path]:
        return [self.workdir / "nats-server.log"]

    def watch_leaders(self) -> None:
        """NATS core and R1 JetStream have no partition leaders to follow."""

    def leader_changes(self) -> list[dict[str, int]]:
        return []


class LeaderWatch:
    """Each partition's leader now and at every change, polled from a thread every 250 ms (a stalled broker
    must not stall the cell's monitor loop). The process that watches must live for the whole cell: the CLI
    runner, or the detached generator when Airflow runs the cell."""

    def __init__(self, address: str, topic: str, client: dict[str, Any] | None = None):
        self.address = address
        self.topic = topic
        self.client = client or {}  # security settings of the cluster's listener
        self._changes: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        from .brokers.kafka import partition_leaders

        def watch() -> None:
            known: dict[int, int] = {}
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    now = time.monotonic_ns()
                    leaders = partition_leaders(self.address, self.topic, 2.0, self.client)
                    for partition, leader in sorted(leaders.items()):
                        if known.get(partition) != leader:
                            self._changes.append({"at_ns": now, "partition": partition, "leader": leader})
                            known[partition] = leader
                self._stop.wait(0.25)

        self._thread = threading.Thread(target=watch, daemon=True, name="leader-watch")
        self._thread.start()

    def changes(self) -> list[dict[str, int]]:
        return list(self._changes)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


class NatsClusterProvisioned:
    """Three nats-server nodes; the cell's stream (R1 or R3) has one leader, which faults hit and which is
    watched like a Kafka partition-0 leader, so received samples are attributed to it."""

    def __init__(self, cell: NatsCell, cell_id: str, workdir: Path, tie_to_parent: bool):
        from .brokers.nats_cluster import NatsCluster
        from .drivers import final_route
        from .drivers.nats import stream_for

        self.cluster = NatsCluster(cell.version, cell.broker, workdir, tie_to_parent)
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.url
        self.replicas = cell.broker.replicas
        # The stream the measured consumers read (a chain's second hop), whose leader faults hit.
        self.stream = stream_for(cell_id, final_route(cell))
        self.workdir = workdir
        self._paused: int | None = None
        self._changes: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def _leader(self) -> int:
        from .errors import BrokerError

        leader = self.cluster.stream_leader(self.stream)
        if leader is None:
            raise BrokerError(f"stream {self.stream} has no leader to fault (no node names one)")
        return leader

    def pause(self) -> None:
        self._paused = self._leader()
        self.cluster.pause(self._paused)

    def resume(self) -> None:
        if self._paused is not None:
            self.cluster.resume(self._paused)
            self._paused = None

    def kill(self) -> None:
        self.cluster.kill(self._leader())

    def watch_leaders(self) -> None:
        """Record the stream leader now and at every change, from a thread (a frozen node's monitor port does not
        answer, and must not stall the cell's monitor loop). No leader (an election) is not recorded: samples
        keep the last leader until a new one is known."""

        def watch() -> None:
            known: int | None = None
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    now = time.monotonic_ns()
                    leader = self.cluster.stream_leader(self.stream, timeout_s=0.2, skip=self._paused)
                    if leader is not None and leader != known:
                        self._changes.append({"at_ns": now, "partition": 0, "leader": leader})
                        known = leader
                self._stop.wait(0.25)

        self._watcher = threading.Thread(target=watch, daemon=True, name="nats-leader-watch")
        self._watcher.start()

    def leader_changes(self) -> list[dict[str, int]]:
        return list(self._changes)

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(5)
        if self._paused is not None:
            self.resume()
        self.cluster.stop()

    def context(self) -> dict[str, Any]:
        """Every node's version, pid and exact config, the cluster name, and the stream's replica count."""
        return {
            **{k: v for k, v in asdict(self.endpoint).items() if k != "workdir"},
            "servers": len(self.endpoint.nodes),
            "replicas": self.replicas,
            "stream": self.stream,
        }

    def pids(self) -> list[int]:
        return list(self.cluster.node_pids.values())

    def logs(self) -> list[Path]:
        return sorted(self.workdir.rglob("*.log"))


class KafkaProvisioned:
    def __init__(self, cell: KafkaCell, cell_id: str, workdir: Path, tie_to_parent: bool):
        from .brokers.kafka import KafkaCluster
        from .drivers import final_route
        from .drivers.kafka import topic_for

        b, c = cell.broker, cell.client
        self.cluster = KafkaCluster(
            cell.version,
            b.brokers,
            b.server,
            workdir,
            tie_to_parent=tie_to_parent,
            security=c.security,
            sasl_mechanism=c.sasl_mechanism,
        )
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.bootstrap_servers
        self.client = self.cluster.client_config  # the listener's TLS/SASL settings (a throw-away password)
        # The topic the measured consumers read, whose leaders the samples are attributed to (and faults hit):
        # the second hop's topic in a service chain.
        self.topic = topic_for(cell_id, final_route(cell))
        self.workdir = workdir
        self._paused: int | None = None
        self._leaders = LeaderWatch(self.address, self.topic, self.client)

    def _leader_of_partition_0(self) -> int:
        from .brokers.kafka import partition_leaders

        return partition_leaders(self.address, self.topic, client=self.client)[0]

    def pause(self) -> None:
        self._paused = self._leader_of_partition_0()
        self.cluster.pause(self._paused)

    def resume(self) -> None:
        if self._paused is not None:
            self.cluster.resume(self._paused)
            self._paused = None

    def kill(self) -> None:
        self.cluster.kill(self._leader_of_partition_0())

    def watch_leaders(self) -> None:
        self._leaders.start()

    def leader_changes(self) -> list[dict[str, int]]:
        return self._leaders.changes()

    def stop(self) -> None:
        self._leaders.stop()
        if self._paused is not None:
            self.resume()
        self.cluster.stop()

    def context(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self.endpoint).items() if k != "workdir"}

    def pids(self) -> list[int]:
        return list(self.cluster.node_pids.values())

    def logs(self) -> list[Path]:
        return sorted(self.workdir.rglob("*.log"))


def provision(
    cell: Cell, workdir: Path, tie_to_parent: bool = True, host: str = "127.0.0.1", run_id: str = ""
) -> Provisioned:
    """Start what `cell` needs and return once it is ready for traffic. `host`: the address a single
    nats-server listens on (its host's address when it runs in a network namespace). External brokers: only
    the cell's topics or streams are created (named after `run_id` too, see `external.route_names`)."""
    spec = cell.spec
    if spec.brokers == "external":
        from .external import ExternalBrokers

        return ExternalBrokers(cell, run_id, workdir).start()
    if isinstance(spec, NatsCell):
        if spec.broker.servers > 1:
            return NatsClusterProvisioned(spec, cell.instance, workdir, tie_to_parent)
        return NatsProvisioned(spec, workdir, tie_to_parent, host)
    return KafkaProvisioned(spec, cell.instance, workdir, tie_to_parent)


def detached_state(brokers: Provisioned) -> dict[str, Any]:
    """What another process needs to signal, watch and stop brokers started with `tie_to_parent=False`:
    Airflow's provision task ends long before the cell does, so the generator and teardown find the
    brokers again from this (JSON-able) record. Provisioned brokers' client settings (a TLS CA path, the
    throw-away SASL password of a cluster started for this cell) are kept under `client`, outside `context`,
    which is what the lake records; external brokers keep no address or secret here at all."""
    from .external import ExternalBrokers, external_state

    if isinstance(brokers, ExternalBrokers):
        return external_state(brokers)
    if isinstance(brokers, NatsProvisioned):
        nodes, name, topic = {"0": brokers.endpoint.pid}, "nats-server", None
    elif isinstance(brokers, NatsClusterProvisioned):  # detached: no stream-leader watch, faults hit node 1
        nodes, name, topic = {str(k): v for k, v in brokers.cluster.node_pids.items()}, "nats-server", None
    else:
        from .brokers.kafka import MAIN_CLASS

        assert isinstance(brokers, KafkaProvisioned)
        nodes, name, topic = {str(k): v for k, v in brokers.cluster.node_pids.items()}, MAIN_CLASS, brokers.topic
    return {
        "address": brokers.address,
        "nodes": nodes,
        "process_name": name,
        "topic": topic,
        "logs": [str(p) for p in brokers.logs()],
        "workdir": str(brokers.workdir),
        "context": brokers.context(),
        "client": dict(getattr(brokers, "client", {})),
    }


def attach(state: dict[str, Any]) -> Any:
    """The brokers recorded in `state` (from `detached_state`), for another process to drive: DetachedBrokers by
    PID, or ExternalBrokers whose connection is resolved again when needed."""
    if state.get("external"):
        from .external import attach_external

        return attach_external(state)
    return DetachedBrokers(state)


def target_of(brokers: Any) -> Target:
    """Where the cell's clients go for these brokers, with their client settings and route names."""
    target = getattr(brokers, "target", None)
    if callable(target):
        return target()
    return Target(brokers.address, dict(getattr(brokers, "client", {}) or {}))


class DetachedBrokers:
    """Brokers started by another process, driven by PID from `detached_state()`.

    Every signal is preceded by a check that the PID is still the broker we started (its command line names
    the broker), so a recycled PID is never signalled."""

    def __init__(self, state: dict[str, Any]):
        self.state = state
        self.address: str = state["address"]
        self.workdir = Path(state["workdir"])
        self.nodes = {int(k): int(v) for k, v in state["nodes"].items()}
        self._name: str = state["process_name"]
        self._paused: int | None = None
        self.client: dict[str, Any] = dict(state.get("client") or {})
        self._leaders = LeaderWatch(self.address, state["topic"], self.client) if state.get("topic") else None

    def _target(self) -> int:
        """The node a fault hits: the leader of partition 0 (Kafka), or the only node."""
        if self._leaders is None:
            return next(iter(self.nodes.values()))
        from .brokers.kafka import partition_leaders

        return self.nodes[partition_leaders(self.address, self.state["topic"], client=self.client)[0]]

    def _signal(self, pid: int, sig: int) -> None:
        import psutil

        from .errors import BrokerError

        try:
            proc = psutil.Process(pid)
            if self._name not in " ".join(proc.cmdline()):
                raise BrokerError(f"pid {pid} is not a {self._name} process; refusing to signal it")
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass

    def pause(self) -> None:
        self._paused = self._target()
        self._signal(self._paused, signal.SIGSTOP)

    def resume(self) -> None:
        if self._paused is not None:
            self._signal(self._paused, signal.SIGCONT)
            self._paused = None

    def kill(self) -> None:
        self._signal(self._target(), signal.SIGKILL)

    def alive(self) -> dict[int, bool]:
        """Node id → whether its process still runs (a zombie counts as gone)."""
        return {node: _alive(pid, self._name) for node, pid in self.nodes.items()}

    def stop(self, grace_s: float = 15.0) -> list[int]:
        """SIGTERM every node at once, SIGKILL after `grace_s`; returns the PIDs that were running."""
        from concurrent.futures import ThreadPoolExecutor

        from .brokers.process import stop_pid

        self.resume()
        pids = list(self.nodes.values())
        with ThreadPoolExecutor(len(pids)) as pool:
            ran = list(pool.map(lambda pid: stop_pid(pid, self._name, grace_s), pids))
        for pid in pids:
            reap_if_child(pid)
        return [pid for pid, was in zip(pids, ran, strict=True) if was]

    def context(self) -> dict[str, Any]:
        return dict(self.state["context"])

    def pids(self) -> list[int]:
        return list(self.nodes.values())

    def logs(self) -> list[Path]:
        return [Path(p) for p in self.state["logs"]]

    def watch_leaders(self) -> None:
        if self._leaders is not None:
            self._leaders.start()

    def leader_changes(self) -> list[dict[str, int]]:
        return self._leaders.changes() if self._leaders is not None else []

    def stop_watching(self) -> None:
        if self._leaders is not None:
            self._leaders.stop()


def _alive(pid: int, name: str) -> bool:
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() != psutil.STATUS_ZOMBIE and name in " ".join(proc.cmdline()):
            return True
    except psutil.NoSuchProcess:  # ZombieProcess included
        pass
    reap_if_child(pid)
    return False


def reap_if_child(pid: int) -> None:
    """Collect the exit status of a broker this very process started (in-process `airflow dags test` runs
    provision and teardown in one interpreter), so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
