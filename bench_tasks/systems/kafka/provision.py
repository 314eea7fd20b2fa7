"""Starting a Kafka cell's brokers: a cluster of 1 or 3 nodes (KRaft, or brokers with their ZooKeeper for releases
before 3.3) with the cell's client security on its listener. Faults hit the broker that leads partition 0 of the
measured topic when they fire (a leader failure is what seeds 001 and 003 study); every partition's leader is
watched for the whole cell. With one host per node (`sites`) each node runs in its own network namespace on its
own address; the leader poll then leaves a node that is frozen or cut off out of its bootstrap list, so its
metadata request never waits on a silent node."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from ...brokers.leaders import LeaderPoll
from ...load.routes import final_route
from .settings import KafkaCell


def start_brokers(
    spec: KafkaCell,
    names: str,
    workdir: Path,
    tie_to_parent: bool,
    host: str,
    sites: Mapping[int, tuple[str, str]] | None = None,
) -> StartedBrokers:
    """`sites`: node id -> (namespace, address) when each node has a host of its own (`host` is then the switch
    namespace's address, where the harness reaches them all from)."""
    from .cluster import MAIN_CLASS, KafkaCluster

    b, c = spec.broker, spec.client
    cluster = KafkaCluster(
        spec.version,
        b.brokers,
        b.server,
        workdir,
        tie_to_parent=tie_to_parent,
        security=c.security,
        sasl_mechanism=c.sasl_mechanism,
        host=host,
        sites=sites,
    )
    e = cluster.start()
    return StartedBrokers(
        address=e.bootstrap_servers,
        nodes=cluster,
        process_name=MAIN_CLASS,
        workdir=workdir,
        context={k: v for k, v in asdict(e).items() if k != "workdir"},
        logs=sorted(workdir.rglob("*.log")),
        client=cluster.client_config,  # the listener's TLS/SASL settings (a throw-away password)
        leader={
            "topic": measured_topic(spec, names),
            **({"quorum_state": _quorum_state_files(e.nodes)} if e.mode == "kraft" else {"controller": "metadata"}),
            "bootstrap": {str(n.node_id): f"{cluster.address_of(n.node_id)}:{n.port}" for n in e.nodes},
        },
        companions=cluster.companions(),  # a ZooKeeper-era cluster's ZooKeeper, which its brokers cannot do without
        vital=[pid for pid, _name in cluster.companions()],
    )


def measured_topic(spec: KafkaCell, names: str) -> str:
    """The topic the measured consumers read (a chain's second hop), whose leaders samples are attributed to."""
    from .driver import topic_for

    return topic_for(names, final_route(spec))


def leader_poll(
    address: str, client: Mapping[str, Any], ref: Mapping[str, Any], patient: bool, paused: Callable[[], int | None]
) -> LeaderPoll | None:
    """The topic's partition leaders (-1: none) from the cluster's metadata, asked of the nodes that are not frozen
    or cut off (`paused()`), where the reference knows each node's listener."""
    if not ref.get("topic"):
        return None
    from .admin import partition_leaders

    timeout_s = 10.0 if patient else 2.0
    listeners = {int(node): where for node, where in (ref.get("bootstrap") or {}).items()}

    def poll() -> dict[int, int]:
        return partition_leaders(_bootstrap_without(address, listeners, paused()), ref["topic"], timeout_s, client)

    return poll


def _bootstrap_without(address: str, listeners: Mapping[int, str], skipped: int | None) -> str:
    """The bootstrap list without the skipped node's listener (unchanged when none is skipped or it is unknown)."""
    if skipped is None or skipped not in listeners or len(listeners) < 2:
        return address
    return ",".join(where for node, where in sorted(listeners.items()) if node != skipped)


def retarget(ref: Mapping[str, Any] | None, spec: KafkaCell, names: str) -> dict[str, Any]:
    return {**(ref or {}), "topic": measured_topic(spec, names)}


def controller_poll(
    address: str, client: Mapping[str, Any], ref: Mapping[str, Any], paused: Callable[[], int | None]
) -> Callable[[], int | None] | None:
    """The active KRaft controller, read from the nodes' quorum-state files (`quorum.py`: no request to a broker
    that may be frozen); under ZooKeeper, the controller the metadata names (the broker holding ZooKeeper's
    `/controller`), asked of the nodes that are not frozen or cut off."""
    files = ref.get("quorum_state")
    if files:
        from .quorum import active_controller

        paths = [Path(p) for p in files.values()]
        return lambda: active_controller(paths)
    if ref.get("controller") == "metadata":
        from .admin import metadata_controller

        listeners = {int(node): where for node, where in (ref.get("bootstrap") or {}).items()}
        return lambda: metadata_controller(_bootstrap_without(address, listeners, paused()), client)
    return None


def describe_running(state: Mapping[str, Any]) -> list[str]:
    """`brokers status` of a ZooKeeper-era cluster names its ZooKeeper."""
    zookeeper = (state.get("context") or {}).get("zookeeper")
    if not zookeeper:
        return []
    return [f"ZooKeeper {zookeeper['version']} at {zookeeper['connect']} (pid {zookeeper['pid']})"]


def _quorum_state_files(nodes: Any) -> dict[str, str]:
    from .quorum import quorum_state_file

    return {str(node.node_id): str(quorum_state_file(node.log_dir)) for node in nodes}
