"""Provision the brokers a cell needs, behind one small interface the runner and fault injection use.

NATS: one nats-server, or a 3-node JetStream cluster (`broker.servers: 3`) whose faults hit the node that leads
the cell's stream. Kafka: a KRaft cluster of 1 or 3 nodes; faults hit the broker that leads partition 0 when
the fault fires (a leader failure is what seeds 001 and 003 study). Leaders (Kafka partitions, the NATS stream
as partition 0) are watched for the whole cell so every change lands with the results: one `LeaderWatch` over
a poll function, one `LeaderFaults` aiming at the leader, for clusters started here and for detached ones
(Airflow) alike. Brokers placed on a network-namespace host run inside it, on its address; leaders are then
asked from a thread inside that namespace, since nothing outside it can reach them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from .brokers.cluster import NodeCluster
from .drivers import Target
from .netns import enter, inside
from .spec.matrix import Cell
from .systems.kafka.settings import KafkaCell
from .systems.nats.settings import NatsCell


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


class Faults(Protocol):
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def kill(self) -> None: ...


class _Faulted:
    """Brokers whose fault injection is delegated to `faults` (a server itself, or a LeaderFaults)."""

    faults: Faults

    def pause(self) -> None:
        self.faults.pause()

    def resume(self) -> None:
        self.faults.resume()

    def kill(self) -> None:
        self.faults.kill()


class NatsProvisioned(_Faulted):
    def __init__(self, cell: NatsCell, workdir: Path, tie_to_parent: bool, host: str = "127.0.0.1"):
        from .systems.nats.server import NatsServer

        self.server = NatsServer(cell.version, cell.broker, workdir, tie_to_parent, host)
        self.endpoint = self.server.start()
        self.address = self.endpoint.url
        self.workdir = workdir
        self.faults = self.server

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
    must not stall the cell's monitor loop). `poll` returns partition → leader node as the cluster says now
    (a partition it leaves out has no known leader: an election; nothing is recorded until one is known).
    The thread enters `netns` first (brokers in a network namespace answer only there). The process that
    watches must live for the whole cell: the CLI runner, or the detached generator when Airflow runs it."""

    def __init__(self, poll: Callable[[], Mapping[int, int]], netns: str = ""):
        self.poll = poll
        self.netns = netns
        self._changes: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        def watch() -> None:
            if self.netns:
                enter(self.netns)
            known: dict[int, int] = {}
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    now = time.monotonic_ns()
                    for partition, leader in sorted(self.poll().items()):
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


class NodeSignals(Protocol):
    def pause(self, node: int) -> None: ...
    def resume(self, node: int) -> None: ...
    def kill(self, node: int) -> None: ...


class LeaderFaults:
    """Faults aimed at the node that leads when they fire (Kafka: partition 0 of the measured topic; NATS: the
    measured stream), asked with `leader` from the brokers' network namespace `netns`, and delivered through
    `nodes`. The frozen node is remembered, so resume thaws the node that was frozen even if leadership moved."""

    def __init__(self, leader: Callable[[], int], nodes: NodeSignals, netns: str = ""):
        self._leader = leader
        self._nodes = nodes
        self._netns = netns
        self.paused: int | None = None

    def leader(self) -> int:
        with inside(self._netns):
            return self._leader()

    def pause(self) -> None:
        self.paused = self.leader()
        self._nodes.pause(self.paused)

    def resume(self) -> None:
        if self.paused is not None:
            self._nodes.resume(self.paused)
            self.paused = None

    def kill(self) -> None:
        self._nodes.kill(self.leader())


class _ClusterProvisioned(_Faulted):
    """A cluster this process started, its faults aimed at a leader and its leaders watched (both in the
    cluster's network namespace): what Kafka and 3-node NATS cells share."""

    cluster: NodeCluster
    faults: LeaderFaults
    leaders: LeaderWatch
    workdir: Path
    netns: str

    def watch_leaders(self) -> None:
        self.leaders.start()

    def leader_changes(self) -> list[dict[str, int]]:
        return self.leaders.changes()

    def stop(self) -> None:
        self.leaders.stop()
        self.faults.resume()
        self.cluster.stop()

    def pids(self) -> list[int]:
        return list(self.cluster.node_pids.values())

    def logs(self) -> list[Path]:
        return sorted(self.workdir.rglob("*.log"))


class NatsClusterProvisioned(_ClusterProvisioned):
    """Three nats-server nodes; the cell's stream (R1 or R3) has one leader, which faults hit and which is
    watched like a Kafka partition-0 leader (as partition 0), so received samples are attributed to it. No
    leader (an election) is not recorded: samples keep the last leader until a new one is known."""

    def __init__(
        self, cell: NatsCell, cell_id: str, workdir: Path, tie_to_parent: bool, host: str = "127.0.0.1", netns: str = ""
    ):
        from .drivers import final_route
        from .drivers.nats import stream_for
        from .systems.nats.cluster import NatsCluster

        self.cluster = NatsCluster(cell.version, cell.broker, workdir, tie_to_parent, host)
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.url
        self.replicas = cell.broker.replicas
        # The stream the measured consumers read (a chain's second hop), whose leader faults hit.
        self.stream = stream_for(cell_id, final_route(cell))
        self.workdir = workdir
        self.netns = netns
        self.faults = LeaderFaults(self._leader, self.cluster, netns)
        self.leaders = LeaderWatch(self._poll, netns)

    def _leader(self) -> int:
        return _stream_leader(self.cluster.stream_leader(self.stream), self.stream)

    def _poll(self) -> dict[int, int]:
        leader = self.cluster.stream_leader(self.stream, timeout_s=0.2, skip=self.faults.paused)
        return {} if leader is None else {0: leader}

    def context(self) -> dict[str, Any]:
        """Every node's version, pid and exact config, the cluster name, and the stream's replica count."""
        return {
            **{k: v for k, v in asdict(self.endpoint).items() if k != "workdir"},
            "servers": len(self.endpoint.nodes),
            "replicas": self.replicas,
            "stream": self.stream,
        }


def _stream_leader(leader: int | None, stream: str) -> int:
    from .errors import BrokerError

    if leader is None:
        raise BrokerError(f"stream {stream} has no leader to fault (no node names one)")
    return leader


class KafkaProvisioned(_ClusterProvisioned):
    def __init__(
        self,
        cell: KafkaCell,
        cell_id: str,
        workdir: Path,
        tie_to_parent: bool,
        host: str = "127.0.0.1",
        netns: str = "",
    ):
        from .drivers import final_route
        from .drivers.kafka import topic_for
        from .systems.kafka.cluster import KafkaCluster

        b, c = cell.broker, cell.client
        self.cluster = KafkaCluster(
            cell.version,
            b.brokers,
            b.server,
            workdir,
            tie_to_parent=tie_to_parent,
            security=c.security,
            sasl_mechanism=c.sasl_mechanism,
            host=host,
        )
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.bootstrap_servers
        self.client = self.cluster.client_config  # the listener's TLS/SASL settings (a throw-away password)
        # The topic the measured consumers read, whose leaders the samples are attributed to (and faults hit):
        # the second hop's topic in a service chain.
        self.topic = topic_for(cell_id, final_route(cell))
        self.workdir = workdir
        self.netns = netns
        self.faults = LeaderFaults(
            lambda: kafka_leaders(self.address, self.topic, self.client)()[0], self.cluster, netns
        )
        self.leaders = LeaderWatch(kafka_leaders(self.address, self.topic, self.client, 2.0), netns)

    def context(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self.endpoint).items() if k != "workdir"}


def kafka_leaders(
    address: str, topic: str, client: Mapping[str, Any], timeout_s: float = 10.0
) -> Callable[[], dict[int, int]]:
    """A poll of `topic`'s partition leaders (-1: none) from the cluster's metadata, for LeaderWatch/LeaderFaults."""

    def poll() -> dict[int, int]:
        from .systems.kafka.admin import partition_leaders

        return partition_leaders(address, topic, timeout_s, client)

    return poll


def provision(
    cell: Cell,
    workdir: Path,
    tie_to_parent: bool = True,
    host: str = "127.0.0.1",
    run_id: str = "",
    netns: str = "",
) -> Provisioned:
    """Start what `cell` needs and return once it is ready for traffic. `host`: the address every broker node
    listens on and advertises (its host's address when it runs in a network namespace); `netns`: that
    namespace, which the calling thread must already be in (the nodes are forked from it) and from which leaders
    are asked later. External brokers: only the cell's topics or streams are created (named after `run_id`
    too, see `external.route_names`)."""
    spec = cell.spec
    if spec.brokers == "external":
        from .external import ExternalBrokers

        return ExternalBrokers(cell, run_id, workdir).start()
    if isinstance(spec, NatsCell):
        if spec.broker.servers > 1:
            return NatsClusterProvisioned(spec, cell.instance, workdir, tie_to_parent, host, netns)
        return NatsProvisioned(spec, workdir, tie_to_parent, host)
    return KafkaProvisioned(spec, cell.instance, workdir, tie_to_parent, host, netns)


def detached_state(brokers: Provisioned) -> dict[str, Any]:
    """What another process needs to signal, watch and stop brokers started with `tie_to_parent=False`:
    Airflow's provision task ends long before the cell does, so the generator and teardown find the
    brokers again from this (JSON-able) record. Provisioned brokers' client settings (a TLS CA path, the
    throw-away SASL password of a cluster started for this cell) are kept under `client`, outside `context`,
    which is what the lake records; external brokers keep no address or secret here at all."""
    from .external import ExternalBrokers, external_state

    if isinstance(brokers, ExternalBrokers):
        return external_state(brokers)
    extra: dict[str, Any] = {}
    if isinstance(brokers, NatsProvisioned):
        nodes, name, topic = {"0": brokers.endpoint.pid}, "nats-server", None
    elif isinstance(brokers, NatsClusterProvisioned):  # its stream's leader is watched and faulted by monitor URL
        nodes, name, topic = {str(k): v for k, v in brokers.cluster.node_pids.items()}, "nats-server", None
        extra = {"stream": brokers.stream, "monitors": {str(n.index): n.monitor_url for n in brokers.endpoint.nodes}}
    else:
        from .systems.kafka.cluster import MAIN_CLASS

        assert isinstance(brokers, KafkaProvisioned)
        nodes, name, topic = {str(k): v for k, v in brokers.cluster.node_pids.items()}, MAIN_CLASS, brokers.topic
    return {
        "address": brokers.address,
        "nodes": nodes,
        "process_name": name,
        "topic": topic,
        "netns": getattr(brokers, "netns", ""),
        **extra,
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


class DetachedBrokers(_Faulted):
    """Brokers started by another process, driven by PID from `detached_state()`: faults hit the leader of the
    measured partition 0 (Kafka) or stream (a NATS cluster), else the only node; leaders are watched likewise,
    from the brokers' network namespace (`netns` in the state).

    Every signal is preceded by a check that the PID is still the broker we started (its command line names
    the broker), so a recycled PID is never signalled."""

    def __init__(self, state: dict[str, Any]):
        self.state = state
        self.address: str = state["address"]
        self.workdir = Path(state["workdir"])
        self.nodes = {int(k): int(v) for k, v in state["nodes"].items()}
        self.netns: str = state.get("netns") or ""
        self._name: str = state["process_name"]
        self.client: dict[str, Any] = dict(state.get("client") or {})
        self.faults = LeaderFaults(self._fault_target, _PidSignals(self.nodes, self._name), self.netns)
        poll = self._leader_poll(2.0, 0.2)
        self._leaders = LeaderWatch(poll, self.netns) if poll is not None else None

    def _leader_poll(self, kafka_timeout_s: float, nats_timeout_s: float) -> Callable[[], Mapping[int, int]] | None:
        """Partition → leader, for Kafka (the topic) and a NATS cluster (its stream, as partition 0); None for a
        single nats-server."""
        if self.state.get("topic"):
            return kafka_leaders(self.address, self.state["topic"], self.client, kafka_timeout_s)
        if self.state.get("monitors"):
            from .systems.nats.cluster import stream_leader

            monitors = {int(k): v for k, v in self.state["monitors"].items()}

            def poll() -> dict[int, int]:
                leader = stream_leader(monitors, self.state["stream"], nats_timeout_s, skip=self.faults.paused)
                return {} if leader is None else {0: leader}

            return poll
        return None

    def _fault_target(self) -> int:
        """The node a fault hits: the leader of partition 0 / the stream now, or the only node."""
        poll = self._leader_poll(10.0, 0.5)
        if poll is None:
            return next(iter(self.nodes))
        leaders = poll()
        if 0 not in leaders and self.state.get("stream"):
            return _stream_leader(None, self.state["stream"])
        return leaders[0]

    def alive(self) -> dict[int, bool]:
        """Node id → whether its process still runs (a zombie counts as gone)."""
        return {node: _alive(pid, self._name) for node, pid in self.nodes.items()}

    def stop(self, grace_s: float = 15.0) -> list[int]:
        """SIGTERM every node at once, SIGKILL after `grace_s`; returns the PIDs that were running."""
        from .brokers.cluster import stop_pids

        self.resume()
        pids = list(self.nodes.values())
        ran = stop_pids(pids, self._name, grace_s)
        for pid in pids:
            reap_if_child(pid)
        return ran

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


class _PidSignals:
    """Signals to the nodes of detached brokers by PID, each PID checked to still be the broker first."""

    def __init__(self, nodes: Mapping[int, int], name: str):
        self.nodes = nodes
        self.name = name

    def _signal(self, node: int, sig: int) -> None:
        import psutil

        from .errors import BrokerError

        pid = self.nodes[node]
        try:
            proc = psutil.Process(pid)
            if self.name not in " ".join(proc.cmdline()):
                raise BrokerError(f"pid {pid} is not a {self.name} process; refusing to signal it")
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass

    def pause(self, node: int) -> None:
        self._signal(node, signal.SIGSTOP)

    def resume(self, node: int) -> None:
        self._signal(node, signal.SIGCONT)

    def kill(self, node: int) -> None:
        self._signal(node, signal.SIGKILL)


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
