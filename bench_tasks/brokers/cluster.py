"""What every multi-node broker cluster the harness starts does the same way, whatever the broker.

A cluster is a set of `BrokerProcess` nodes keyed by node id (Kafka's node.id, NATS's n1..n3 index). Faults hit
one node (SIGSTOP, SIGCONT, SIGKILL); stopping ends every node at once, because a node shut down after its
quorum is gone waits for peers that will not answer (and a system whose last node waits even so says how long it
may: `System.last_node_grace_s`). A detached cluster (`tie_to_parent=False`) is stopped later
by PID from the JSON-able `state()`, each PID checked to be the broker before it is signalled.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Self, TypeVar

from ..errors import BrokerError
from .process import BrokerProcess, stop_pid, terminate_checked

N = TypeVar("N")  # a node as a stop sees it: a BrokerProcess, or a psutil.Process of a detached one


class NodeCluster:
    """Nodes by id, with the fault, stop and context-manager behaviour both Kafka and NATS clusters share.

    Subclasses set `KIND` (for messages), `STOP_GRACE_S` (how long a node may take to shut down before SIGKILL)
    and fill `processes` and `endpoint` (a dataclass) in their `start()`. `host` is the address every node
    listens on and advertises: 127.0.0.1, or a network-namespace host's address when the cluster is started from
    a thread inside that namespace."""

    KIND: ClassVar[str] = "broker"
    STOP_GRACE_S: ClassVar[float] = 10.0
    # The node still running once every other one exited is killed that much later (`System.last_node_grace_s`,
    # which a detached cluster's stop uses); None: it is given the whole stop grace.
    LAST_NODE_GRACE_S: ClassVar[float | None] = None

    endpoint: Any

    def __init__(self, version: str, workdir: Path | str, tie_to_parent: bool = True, host: str = "127.0.0.1"):
        self.version = version
        self.workdir = Path(workdir)
        self.tie_to_parent = tie_to_parent
        self.host = host  # the address every node listens on (and advertises)
        self.processes: dict[int, BrokerProcess] = {}
        self.endpoint = None

    def start(self) -> Any:
        raise NotImplementedError

    @property
    def node_pids(self) -> dict[int, int]:
        return {node_id: proc.pid for node_id, proc in self.processes.items()}

    def pause(self, node_id: int) -> None:
        """SIGSTOP one node (the CTRL+Z test); its peers see it as unresponsive, not gone."""
        self._node(node_id).pause()

    def resume(self, node_id: int) -> None:
        self._node(node_id).resume()

    def kill(self, node_id: int) -> None:
        """SIGKILL one node: an abrupt failure, for loss accounting and leader fail-over."""
        self._node(node_id).kill()

    def alive(self) -> dict[int, bool]:
        return {node_id: proc.alive() for node_id, proc in self.processes.items()}

    def stop(self, grace_s: float | None = None) -> list[int]:
        """SIGTERM every node at once, then SIGKILL what is left after `grace_s` (default `STOP_GRACE_S`);
        returns the PIDs that were still running."""
        grace = self.STOP_GRACE_S if grace_s is None else grace_s
        procs = list(self.processes.values())
        alive = [proc for proc in procs if proc.alive()]
        if self.LAST_NODE_GRACE_S is not None and len(alive) > 1:
            _terminate_together(alive, grace, self.LAST_NODE_GRACE_S)
        if procs:
            with ThreadPoolExecutor(len(procs)) as pool:
                list(pool.map(lambda proc: proc.stop(grace), procs))
        return [proc.pid for proc in alive]

    def _node(self, node_id: int) -> BrokerProcess:
        if node_id not in self.processes:
            known = sorted(self.processes) or "none (not started)"
            raise BrokerError(f"no {self.KIND} node {node_id}; nodes: {known}")
        return self.processes[node_id]

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        """The endpoint as JSON-able data: with tie_to_parent=False, the module's `stop_detached(state)` ends
        the cluster later."""
        if self.endpoint is None:
            raise BrokerError(f"the {self.KIND} cluster has not been started")
        return asdict(self.endpoint)


def _terminate_together(procs: Sequence[BrokerProcess], grace_s: float, last_grace_s: float) -> None:
    """SIGTERM (after SIGCONT) every node at once, then SIGKILL what `_wait_out_together` gives up on, as
    `_stop_together` does for a detached cluster. Each node is then reaped (and its log closed) by its own `stop`."""
    for proc in procs:
        proc.resume()
        proc.popen.terminate()
    for proc in _wait_out_together(procs, BrokerProcess.alive, grace_s, last_grace_s):
        proc.kill()


def _wait_out_together(
    nodes: Sequence[N], running: Callable[[N], bool], grace_s: float, last_grace_s: float
) -> list[N]:
    """Wait for nodes signalled together to exit. Returns the ones to SIGKILL: the last one left once
    `last_grace_s` passed since the others exited, or every one still `running` once `grace_s` passed."""
    deadline, alone_since = time.monotonic() + grace_s, None
    left = list(nodes)
    while left:
        time.sleep(0.05)
        left = [node for node in left if running(node)]
        now = time.monotonic()
        if len(left) == 1 and alone_since is None:
            alone_since = now
        if left and (now > deadline or (alone_since is not None and now - alone_since > last_grace_s)):
            return left
    return []


def stop_pids(pids: Sequence[int], process_name: str, grace_s: float, last_grace_s: float | None = None) -> list[int]:
    """Stop detached broker nodes by PID, all at once (SIGTERM, SIGKILL after `grace_s`); each PID is checked to
    be a `process_name` process before it is signalled. Returns the PIDs that were running. `last_grace_s`: the
    node still running once every other one exited is killed that much later (`System.last_node_grace_s`)."""
    if not pids:
        return []
    if last_grace_s is not None and len(pids) > 1:
        return _stop_together(pids, process_name, grace_s, last_grace_s)
    with ThreadPoolExecutor(len(pids)) as pool:
        stopped = list(pool.map(lambda pid: stop_pid(pid, process_name, grace_s), pids))
    return [pid for pid, was_running in zip(pids, stopped, strict=True) if was_running]


def _stop_together(pids: Sequence[int], process_name: str, grace_s: float, last_grace_s: float) -> list[int]:
    """SIGTERM every node at once (each PID checked first), SIGKILL what `_wait_out_together` gives up on."""
    import psutil

    signalled = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            signalled.append(terminate_checked(pid, process_name))
    left = _wait_out_together(signalled, _still_running, grace_s, last_grace_s)
    for proc in left:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(left, timeout=10)
    return [proc.pid for proc in signalled]


def _still_running(proc: Any) -> bool:
    """Whether a psutil.Process has not exited yet (one that is our child is reaped here)."""
    import psutil

    try:
        proc.wait(timeout=0)
    except psutil.TimeoutExpired:
        return True
    return False


def stop_nodes(state: Mapping[str, Any], process_name: str, grace_s: float) -> list[int]:
    """Stop the nodes of a detached cluster from its `state()` (see `stop_pids`)."""
    return stop_pids([int(node["pid"]) for node in state["nodes"]], process_name, grace_s)
