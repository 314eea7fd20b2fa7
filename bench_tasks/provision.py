"""Provision the brokers a cell needs, behind one small interface the runner and fault injection use.

NATS: one nats-server, or a 3-node JetStream cluster (`broker.servers: 3`) whose faults hit the node that leads
the cell's stream. Kafka: a KRaft cluster of 1 or 3 nodes; faults hit the broker that leads partition 0 when
the fault fires (a leader failure is what seeds 001 and 003 study). Leaders (Kafka partitions, the NATS stream
as partition 0) are watched for the whole cell so every change lands with the results.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

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
    def __init__(self, cell: NatsCell, workdir: Path, tie_to_parent: bool):
        from .brokers.nats import NatsServer

        self.server = NatsServer(cell.version, cell.broker, workdir, tie_to_parent)
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


class NatsClusterProvisioned:
    """Three nats-server nodes; the cell's stream (R1 or R3) has one leader, which faults hit and which is
    watched like a Kafka partition-0 leader, so received samples are attributed to it."""

    def __init__(self, cell: NatsCell, cell_id: str, workdir: Path, tie_to_parent: bool):
        from .brokers.nats_cluster import NatsCluster
        from .drivers import HOP2, MEASURED
        from .drivers.nats import stream_for

        self.cluster = NatsCluster(cell.version, cell.broker, workdir, tie_to_parent)
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.url
        self.replicas = cell.broker.replicas
        # The stream the measured consumers read (a chain's second hop), whose leader faults hit.
        self.stream = stream_for(cell_id, HOP2 if cell.measurement == "chain" else MEASURED)
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
        from .drivers import HOP2, MEASURED
        from .drivers.kafka import topic_for

        b = cell.broker
        self.cluster = KafkaCluster(cell.version, b.brokers, b.server, workdir, tie_to_parent=tie_to_parent)
        self.endpoint = self.cluster.start()
        self.address = self.endpoint.bootstrap_servers
        # The topic the measured consumers read, whose leaders the samples are attributed to (and faults hit):
        # the second hop's topic in a service chain.
        self.topic = topic_for(cell_id, HOP2 if cell.measurement == "chain" else MEASURED)
        self.workdir = workdir
        self._paused: int | None = None
        self._changes: list[dict[str, int]] = []
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def _leader_of_partition_0(self) -> int:
        from .brokers.kafka import partition_leaders

        return partition_leaders(self.address, self.topic)[0]

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
        """Record each partition's leader now and at every change, from a thread (a stalled broker must
        not stall the cell's monitor loop)."""
        from .brokers.kafka import partition_leaders

        def watch() -> None:
            known: dict[int, int] = {}
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    now = time.monotonic_ns()
                    for partition, leader in sorted(partition_leaders(self.address, self.topic, 2.0).items()):
                        if known.get(partition) != leader:
                            self._changes.append({"at_ns": now, "partition": partition, "leader": leader})
                            known[partition] = leader
                self._stop.wait(0.25)

        self._watcher = threading.Thread(target=watch, daemon=True, name="leader-watch")
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
        return {k: v for k, v in asdict(self.endpoint).items() if k != "workdir"}

    def pids(self) -> list[int]:
        return list(self.cluster.node_pids.values())

    def logs(self) -> list[Path]:
        return sorted(self.workdir.rglob("*.log"))


def provision(cell: Cell, workdir: Path, tie_to_parent: bool = True) -> Provisioned:
    """Start what `cell` needs and return once it is ready for traffic."""
    spec = cell.spec
    if isinstance(spec, NatsCell):
        if spec.broker.servers > 1:
            return NatsClusterProvisioned(spec, cell.id, workdir, tie_to_parent)
        return NatsProvisioned(spec, workdir, tie_to_parent)
    return KafkaProvisioned(spec, cell.id, workdir, tie_to_parent)
