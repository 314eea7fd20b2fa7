"""Starting a RabbitMQ cell's nodes, and asking who leads its measured queue.

The nodes are the cell's own (`nodes.RabbitCluster`: private epmd, cookie, ports and folders). The leader of the
measured queue (a quorum queue's or a stream's leader node, a classic queue's home node) is read from the queue's
record over Erlang distribution (`erl.py`), from the first node that answers and is not frozen; it is recorded as
partition 0, like a JetStream stream's, so received samples carry the node that led the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...brokers.handles import StartedBrokers
from ...brokers.leaders import LeaderPoll
from ...errors import BrokerError
from ...load.routes import final_route
from . import erl
from .settings import RabbitmqCell

PROCESS_NAME = "beam.smp"


# What a node logs when a port chosen free was taken by another process before the node bound it.
_PORT_TAKEN = ("dist_port_already_used", "eaddrinuse")
START_ATTEMPTS = 3


def start_cluster(spec: RabbitmqCell, workdir: Path, tie_to_parent: bool, host: str) -> Any:
    """Start the cell's nodes, on fresh free ports again (up to `START_ATTEMPTS`) when another process took a port
    between its choice and the node's bind (a shared host's race); any other failure is raised at once."""
    from .nodes import RabbitCluster

    for attempt in range(1, START_ATTEMPTS + 1):
        cluster = RabbitCluster(spec.version, spec.broker, workdir, tie_to_parent, host)
        try:
            cluster.start()
            return cluster
        except BrokerError as exc:
            if attempt == START_ATTEMPTS or not any(word in str(exc) for word in _PORT_TAKEN):
                raise
    raise AssertionError("unreachable")


def start_brokers(spec: RabbitmqCell, names: str, workdir: Path, tie_to_parent: bool, host: str) -> StartedBrokers:
    cluster = start_cluster(spec, workdir, tie_to_parent, host)
    e = cluster.endpoint
    return StartedBrokers(
        address=e.url,
        nodes=cluster,
        process_name=PROCESS_NAME,
        workdir=workdir,
        context=cluster.context() | {"queue": measured_queue(spec, names)},
        logs=[Path(node.log_path) for node in e.nodes],
        leader=_leader_ref(e, measured_queue(spec, names)) if len(e.nodes) > 1 else None,
        companions=cluster.companions(),
        client=cluster.user.client(),  # the cell's user: the harness's clients log in with it
    )


def _leader_ref(e: Any, queue: str) -> dict[str, Any]:
    """How to ask who leads `queue`: every node's distribution address, and the cookie's home. One node needs no
    watch (it leads everything; a fault hits the only node)."""
    return {"home": e.home, "dist": {str(n.index): [e.host, n.dist_port] for n in e.nodes}, "queue": queue}


def measured_queue(spec: RabbitmqCell, names: str) -> str:
    from .driver import queue_for

    return queue_for(names, final_route(spec))  # a chain's second hop: what the measured consumers read


def leader_poll(
    address: str, client: Mapping[str, Any], ref: Mapping[str, Any], patient: bool, paused: Callable[[], int | None]
) -> LeaderPoll | None:
    """The measured queue's leader node (as partition 0), asked of the nodes in turn; a frozen node is skipped
    (a question to it would wait out the timeout)."""
    if not ref.get("dist") or not ref.get("queue"):
        return None
    nodes = {int(k): (v[0], int(v[1])) for k, v in ref["dist"].items()}
    home, expr = Path(ref["home"]), erl.leader_expr(ref["queue"])
    timeout_s = 1.0 if patient else 0.5

    def poll() -> dict[int, int]:
        for index, (host, port) in nodes.items():
            if index == paused():
                continue
            answer = erl.evaluate(host, port, expr, home, timeout_s)
            if answer is not None:
                leader = erl.node_index(answer)
                return {} if leader is None else {0: leader}
        return {}

    return poll


def retarget(ref: Mapping[str, Any] | None, spec: RabbitmqCell, names: str) -> dict[str, Any] | None:
    """A reused cluster's leader reference made the next cell's (its queue)."""
    return {**ref, "queue": measured_queue(spec, names)} if ref else None


def describe_running(state: Mapping[str, Any]) -> list[str]:
    context = state.get("context") or {}
    version, erlang = context.get("version", "?"), context.get("erlang", "?")
    return [f"RabbitMQ {version} on Erlang {erlang}, epmd port {context.get('epmd_port')}"]
