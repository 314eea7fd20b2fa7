"""Brokers a cell runs against, behind one interface whatever started them (the broker-control protocol).

Three kinds, one protocol (`BrokerHandle`): brokers this process started (`NodeBrokers.started`), the same brokers
attached by another process from their JSON state (`NodeBrokers.attached`: Airflow's provision task ends long before
the cell does, so the generator and teardown find them again by PID), and brokers the cell does not own
(`external.ExternalBrokers`, which refuse faults). A system's package starts its nodes and says how to ask who
leads its routes (`System.start_brokers`, `System.leader_poll`); everything else here is the same for every system.

Faults hit the node that leads the measured route when they fire (partition 0 of the measured topic, or the measured
stream), or the only node; the frozen node is remembered, so resume thaws it even if leadership moved. Every signal
to an attached node is preceded by a check that its PID is still the broker we started, so a recycled PID is never
signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import BrokerError
from ..load.routes import Target
from ..secrecy import remember_settings, secret_parts, write_secret
from ..topology.netns import inside
from .cluster import stop_pids
from .leaders import LeaderPoll, LeaderWatch
from .process import wait_stopped

# 1: kind, system, address, nodes {id: pid}, process_name, netns, workdir, logs, context, client, leader
# 2: `client` without secrets; `client_secrets`: the private file that holds them (None: there are none);
#    companions [[pid, process name]] (optional: absent in states written before it, read as none);
#    node_netns {id: namespace} with one host per node (optional likewise); vital_companions [pid] (optional)
STATE_SCHEMA = 2
SECRETS_FILE = Path("secrets") / "client.json"  # under the brokers' workdir, removed with it at teardown
COMPANION_GRACE_S = 5.0


class BrokerHandle(Protocol):
    """What the cell's life asks of its brokers, whichever kind they are."""

    address: str

    def target(self) -> Target: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def kill(self) -> None: ...
    def fault_nodes(self) -> list[int]: ...
    def fault_leader(self) -> int: ...
    def fault_controller(self) -> int: ...
    def pause_node(self, node: int) -> None: ...
    def resume_node(self, node: int) -> None: ...
    def kill_node(self, node: int) -> None: ...
    def restart_node(self, node: int) -> int: ...
    def skip_node(self, node: int | None) -> None: ...
    def alive(self) -> dict[int, bool]: ...
    def running(self) -> list[int]: ...
    def watch_leaders(self) -> None: ...
    def await_leaders(self, timeout_s: float) -> bool: ...
    def stop_watching(self) -> None: ...
    def leader_changes(self) -> list[dict[str, int]]: ...
    def leader_poll_errors(self) -> dict[str, Any]: ...
    def context(self) -> dict[str, Any]: ...
    def pids(self) -> list[int]: ...
    def node_pids(self) -> dict[int, int]: ...
    def logs(self) -> list[Path]: ...
    def state(self) -> dict[str, Any]: ...
    def stop(self) -> list[int]: ...


class NodeSystem(Protocol):
    """What provisioned brokers ask of their system (`systems.base.System` is one): its name, how long its last
    node may take to stop, and the polls of who leads. Declared here so the brokers need not know the system
    registry, which itself builds on the brokers."""

    @property
    def name(self) -> str: ...
    @property
    def last_node_grace_s(self) -> float | None: ...
    def leader_poll(
        self,
        address: str,
        client: Mapping[str, Any],
        ref: Mapping[str, Any],
        patient: bool,
        paused: Callable[[], int | None],
    ) -> LeaderPoll | None: ...
    def controller_poll(
        self, address: str, client: Mapping[str, Any], ref: Mapping[str, Any], paused: Callable[[], int | None]
    ) -> Callable[[], int | None] | None: ...


class Nodes(Protocol):
    """A system's running nodes by id (Kafka's node.id, a NATS cluster's 1..3, a single server's 0)."""

    @property
    def node_pids(self) -> dict[int, int]: ...
    def pause(self, node: int) -> None: ...
    def resume(self, node: int) -> None: ...
    def kill(self, node: int) -> None: ...
    def alive(self) -> dict[int, bool]: ...
    def stop(self) -> list[int]: ...


@dataclass
class StartedBrokers:
    """What a system hands back once a cell's brokers are ready for traffic."""

    address: str
    nodes: Nodes
    process_name: str  # what every node's command line contains (checked before an attached node is signalled)
    workdir: Path
    context: dict[str, Any]  # version as the brokers report it, exact config, pids, ports: recorded with the cell
    logs: list[Path]
    client: dict[str, Any] = field(default_factory=dict)  # TLS/SASL settings of this cluster's listener (secret)
    leader: dict[str, Any] | None = None  # the system's reference to the route whose leader is watched and faulted
    # Processes that serve the nodes without being one (a private name server, a node's port helpers): never
    # faulted, stopped by PID after the nodes (each checked to still be `name` first), whichever process stops.
    companions: list[tuple[int, str]] = field(default_factory=list)
    # The companions (by PID) the nodes cannot serve without (a ZooKeeper-era Kafka cluster's ZooKeeper): watched
    # like a node while a cell runs (`cell.brokerwatch`), so one that exits fails the cell with its name.
    vital: list[int] = field(default_factory=list)


class NodeBrokers:
    """Provisioned brokers: nodes started here, or attached by PID from `state()`."""

    def __init__(
        self, system: NodeSystem, started: StartedBrokers, netns: str = "", node_netns: Mapping[int, str] | None = None
    ):
        """`netns`: where the harness reaches the nodes from; `node_netns`: with one host per node, the namespace
        each node runs in (a restarted node starts there again)."""
        self.system = system
        self.address = started.address
        self.nodes = started.nodes
        self.process_name = started.process_name
        self.workdir = started.workdir
        self.netns = netns
        self.node_netns = dict(node_netns or {})
        self.client = dict(started.client)
        remember_settings(self.client)  # a per-cell password reaches no record this process writes
        self.leader_ref = started.leader
        self.companions = list(started.companions)
        self.vital = list(started.vital)
        self._context = started.context
        self._logs = started.logs
        self.paused: int | None = None
        self.unreachable: int | None = None  # a node cut off (partition): polls do not wait for its answer
        poll = self._poll(patient=False)
        self._watch = LeaderWatch(poll, netns) if poll is not None else None

    @classmethod
    def attached(cls, state: Mapping[str, Any], system: NodeSystem) -> NodeBrokers:
        pids = {int(k): int(v) for k, v in state["nodes"].items()}
        nodes = PidNodes(pids, state["process_name"], last_grace_s=system.last_node_grace_s)
        started = StartedBrokers(
            address=state["address"],
            nodes=nodes,
            process_name=state["process_name"],
            workdir=Path(state["workdir"]),
            context=dict(state["context"]),
            logs=[Path(p) for p in state["logs"]],
            client=client_of(state),
            leader=state.get("leader"),
            companions=[(int(pid), str(name)) for pid, name in state.get("companions") or []],
            vital=[int(pid) for pid in state.get("vital_companions") or []],
        )
        node_netns = {int(k): v for k, v in (state.get("node_netns") or {}).items()}
        return cls(system, started, state.get("netns") or "", node_netns)

    def _poll(self, patient: bool) -> LeaderPoll | None:
        if self.leader_ref is None:
            return None
        return self.system.leader_poll(self.address, self.client, self.leader_ref, patient, self._skipped)

    def _skipped(self) -> int | None:
        """The node a poll need not ask: frozen, or cut off."""
        return self.paused if self.paused is not None else self.unreachable

    def retarget(self, leader: dict[str, Any] | None) -> None:
        """A reused cluster serves the next cell: watch and fault that cell's route from now on."""
        self.leader_ref = leader
        poll = self._poll(patient=False)
        self._watch = LeaderWatch(poll, self.netns) if poll is not None else None

    # -- faults -------------------------------------------------------------------------------------------------
    def fault_target(self) -> int:
        """The node a fault hits now: the measured route's leader, or the only node."""
        poll = self._poll(patient=True)
        if poll is None:
            return next(iter(self.nodes.node_pids))
        with inside(self.netns):
            leaders = poll()
        if 0 not in leaders or leaders[0] < 0:
            raise BrokerError(f"{self.system.name}: the measured route has no leader to fault ({self.leader_ref})")
        return leaders[0]

    fault_leader = fault_target

    def fault_controller(self) -> int:
        """The node that leads the cluster's metadata now (a fault's `controller` target); a single node leads its
        own."""
        if len(self.nodes.node_pids) == 1:
            return next(iter(self.nodes.node_pids))
        poll = self.system.controller_poll(self.address, self.client, self.leader_ref or {}, self._skipped)
        if poll is None:
            raise BrokerError(f"{self.system.name}: these brokers have no metadata leader (controller) to fault")
        with inside(self.netns):
            node = poll()
        if node is None:
            raise BrokerError(f"{self.system.name}: no node leads the cluster's metadata now (an election?)")
        return node

    def fault_nodes(self) -> list[int]:
        return sorted(self.nodes.node_pids)

    def pause_node(self, node: int) -> None:
        self.paused = node
        self.nodes.pause(node)

    def resume_node(self, node: int) -> None:
        self.nodes.resume(node)
        if self.paused == node:
            self.paused = None

    def kill_node(self, node: int) -> None:
        self.nodes.kill(node)

    def restart_node(self, node: int) -> int:
        """Kill the node and start it again on its data, in its namespace; its new PID."""
        restart = getattr(self.nodes, "restart", None)
        if restart is None:
            raise BrokerError(f"{self.system.name}: these brokers' nodes cannot be restarted")
        with inside(self.node_netns.get(node, self.netns)):
            return int(restart(node))

    def skip_node(self, node: int | None) -> None:
        self.unreachable = node

    def pause(self) -> None:
        self.pause_node(self.fault_target())

    def resume(self) -> None:
        if self.paused is not None:
            self.resume_node(self.paused)

    def kill(self) -> None:
        self.kill_node(self.fault_target())

    def alive(self) -> dict[int, bool]:
        return self.nodes.alive()

    def running(self) -> list[int]:
        """PIDs of the nodes still running."""
        pids, alive = self.nodes.node_pids, self.nodes.alive()
        return [pid for node, pid in pids.items() if alive.get(node)]

    # -- leaders ------------------------------------------------------------------------------------------------
    def watch_leaders(self) -> None:
        if self._watch is not None:
            self._watch.start()

    def await_leaders(self, timeout_s: float) -> bool:
        """Wait until the leader watch has named the measured route's leader (True at once without a watch)."""
        return self._watch is None or self._watch.wait_known(timeout_s)

    def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.stop()

    def leader_changes(self) -> list[dict[str, int]]:
        return self._watch.changes() if self._watch is not None else []

    def leader_poll_errors(self) -> dict[str, Any]:
        return self._watch.poll_errors() if self._watch is not None else {"count": 0, "last": None}

    # -- records ------------------------------------------------------------------------------------------------
    def target(self) -> Target:
        return Target(self.address, dict(self.client))

    def context(self) -> dict[str, Any]:
        return dict(self._context)

    def pids(self) -> list[int]:
        return list(self.nodes.node_pids.values())

    def node_pids(self) -> dict[int, int]:
        return dict(self.nodes.node_pids)

    def vital_companions(self) -> dict[int, str]:
        """PID -> process name of the companions the nodes cannot serve without (watched like the nodes)."""
        return {pid: name for pid, name in self.companions if pid in self.vital}

    def logs(self) -> list[Path]:
        return list(self._logs)

    def state(self) -> dict[str, Any]:
        """What another process needs to signal, watch and stop these brokers. The client settings (a TLS CA
        path, the throw-away SASL password of a cluster started for this cell) are kept outside `context`, which
        is what the lake records; their secrets only in a private file in the brokers' own folder (removed with
        it), which `client_secrets` names, so the state can be written and copied anywhere."""
        public, secret = secret_parts(self.client)
        secrets_file = write_secret(self.workdir / SECRETS_FILE, json.dumps(secret)) if secret else None
        return {
            "schema": STATE_SCHEMA,
            "kind": "provisioned",
            "system": self.system.name,
            "address": self.address,
            "nodes": {str(k): v for k, v in self.nodes.node_pids.items()},
            "process_name": self.process_name,
            "netns": self.netns,
            "node_netns": {str(k): v for k, v in self.node_netns.items()},
            "workdir": str(self.workdir),
            "logs": [str(p) for p in self._logs],
            "context": self.context(),
            "client": public,
            "client_secrets": str(secrets_file) if secrets_file else None,
            "leader": self.leader_ref,
            "companions": [[pid, name] for pid, name in self.companions],
            "vital_companions": list(self.vital),
        }

    def stop(self) -> list[int]:
        """Stop watching, thaw a frozen node, stop every node; returns the PIDs that were running."""
        self.stop_watching()
        self.resume()
        ran = self.nodes.stop()
        for name in sorted({name for _pid, name in self.companions}):
            stop_pids([pid for pid, n in self.companions if n == name], name, COMPANION_GRACE_S)
        return ran


class PidNodes:
    """Nodes another process started, signalled by PID, each PID checked to still be the broker first."""

    def __init__(
        self, nodes: Mapping[int, int], process_name: str, grace_s: float = 15.0, last_grace_s: float | None = None
    ):
        self.nodes = dict(nodes)
        self.name = process_name
        self.grace_s = grace_s
        self.last_grace_s = last_grace_s  # see System.last_node_grace_s

    @property
    def node_pids(self) -> dict[int, int]:
        return dict(self.nodes)

    def _signal(self, node: int, sig: int) -> None:
        import psutil

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
        wait_stopped(self.nodes[node])

    def resume(self, node: int) -> None:
        self._signal(node, signal.SIGCONT)

    def kill(self, node: int) -> None:
        self._signal(node, signal.SIGKILL)

    def restart(self, node: int) -> int:
        """SIGKILL the node, then start it again exactly as it ran (command line, folder, environment, log), on
        the same config and data; returns its new PID, which replaces the old one. The new process dies with the
        thread that starts it (PR_SET_PDEATHSIG): a restarted node never outlives the cell's generator."""
        import psutil

        pid = self.nodes[node]
        proc = psutil.Process(pid)
        argv = proc.cmdline()
        if self.name not in " ".join(argv):
            raise BrokerError(f"pid {pid} is not a {self.name} process; refusing to restart it")
        if not os.path.isfile(argv[0]):
            raise BrokerError(f"{self.name} (pid {pid}) rewrote its command line ({argv[0]!r}): cannot start it again")
        cwd, env, log = proc.cwd(), proc.environ(), os.readlink(f"/proc/{pid}/fd/1")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        reap_if_child(pid)
        self.nodes[node] = start_again(argv, cwd, env, log)
        return self.nodes[node]

    def alive(self) -> dict[int, bool]:
        """Node id -> whether its process still runs (a zombie counts as gone)."""
        return {node: pid_alive(pid, self.name) for node, pid in self.nodes.items()}

    def stop(self) -> list[int]:
        """SIGTERM every node at once, SIGKILL after the grace period; returns the PIDs that were running."""
        pids = list(self.nodes.values())
        ran = stop_pids(pids, self.name, self.grace_s, self.last_grace_s)
        for pid in pids:
            reap_if_child(pid)
        return ran


def start_again(argv: list[str], cwd: str, env: dict[str, str], log: str) -> int:
    """Start a killed node's command again, its output appended to the log it wrote to (if it was a file)."""
    import subprocess

    from .process import _die_with_parent

    out = open(log, "ab") if log.startswith("/") and os.path.isfile(log) else subprocess.DEVNULL  # noqa: SIM115
    try:
        child = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,
        )
    finally:
        if out is not subprocess.DEVNULL:
            out.close()
    return child.pid


def client_of(state: Mapping[str, Any]) -> dict[str, Any]:
    """The client settings a provisioned brokers' state names: its public part and its private file's."""
    return {**(state.get("client") or {}), **_read_secrets(state.get("client_secrets"))}


def _read_secrets(path: str | None) -> dict[str, Any]:
    """The client secrets a state names (none once its brokers' folder was removed: then only stopping works)."""
    try:
        return json.loads(Path(path).read_text()) if path else {}
    except FileNotFoundError:
        return {}


def pid_alive(pid: int, name: str) -> bool:
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
