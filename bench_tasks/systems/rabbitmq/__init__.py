"""RabbitMQ: Debian's rabbitmq-server, 1 node or a 3-node cluster per cell, classic, quorum and stream queues over
AMQP 0-9-1 with pika on the harness's asyncio loop.

- `settings.py`: `RabbitmqBroker`, `RabbitmqClient` and the cell `RabbitmqCell`, with what only RabbitMQ refuses;
- `release.py`: the releases Debian serves and the verified `rabbitmq-server` of the installed one;
- `nodes.py`, `nodefiles.py`, `erl.py`: the nodes of one cell with their private epmd and cookie, their files, and
  questions to a node over `erl_call`;
- `provision.py`: a cell's nodes as the broker-control protocol's `StartedBrokers`, and the queue-leader poll;
- `driver.py`: publish (confirms), consume (auto/manual acks), request/reply through the broker;
- `omb.py`: OpenMessaging Benchmark's RabbitMQ driver files in the cell's terms (`sixnines import omb`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .settings import RabbitmqBroker, RabbitmqCell, RabbitmqClient


class Rabbitmq(System):
    name: ClassVar[str] = "rabbitmq"
    cell_model = RabbitmqCell
    setup_estimate_s = 12.0  # an Erlang VM per node booting RabbitMQ (bench/rabbitmq_nodes.py)
    calibration_measurement = "rtt"  # request/reply through a queue: a frozen node stalls the synchronous requester
    calibration_broker: ClassVar[Mapping[str, Any]] = {"nodes": 1}
    client_libraries = ("pika",)
    fault_actions = frozenset({"stall", "kill"})  # no restart: a node is more than its VM's command (epmd, helpers)
    fault_targets = frozenset({"leader", "follower", "node", "random"})

    @staticmethod
    def fault_nodes(broker: Any) -> list[int]:
        """Nodes n1..nodes."""
        return list(range(1, broker.nodes + 1))

    def label(self, spec: Any) -> str:
        b, c = spec.broker, spec.client
        setup = f"rabbitmq n{b.nodes} {b.queue_type}"
        if b.replicas > 1:
            setup += f" R{b.replicas}"
        setup += " durable" if b.durable and b.queue_type == "classic" else ""
        setup += " persistent" if b.persistent and b.queue_type == "classic" else ""
        setup += "" if b.exchange == "default" else f" x={b.exchange}"
        setup += " confirms" if c.confirms and spec.measurement != "rtt" else ""  # rtt: the reply is the ack
        setup += f" acks={c.acks}" + (f" prefetch={c.prefetch}" if c.prefetch else "")
        return setup + (" client=java" if c.library == "java" else "")

    def worker_program(self, spec: Any, role: str) -> Any:
        """The JVM worker on RabbitMQ's Java client when `client.library` is java, else the Python worker."""
        from .jvm_client import worker_program

        return worker_program(spec, role)

    def group_tag(self, spec: Any) -> str:
        return spec.broker.queue_type

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        """Publisher confirms are a client setting, so every RabbitMQ cell may have them; whether a given cell
        did is its `client.confirms` (`acked_metric`)."""
        return True

    def acked_metric(self, spec: Mapping[str, Any]) -> str | None:
        """An rtt reply; else `publish` only when the cell's client asks for publisher confirms: without them a
        publish is fire-and-forget and there is no acknowledgement to time."""
        if spec.get("measurement") == "rtt":
            return "rtt"
        return "publish" if (spec.get("client") or {}).get("confirms", True) else None

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """With publisher confirms, a confirmed message is in its queue (of any type) and is delivered while the
        nodes run: the gate tolerates no loss of one. Without confirms a publish is fire-and-forget."""
        return bool((spec.get("client") or {}).get("confirms", True))

    def promises_no_acknowledged_loss(self, spec: Mapping[str, Any]) -> bool:
        """A quorum queue of three replicas or more, publisher confirms (a confirm waits for a majority of the
        replicas) and manual consumer acks (an auto-acked delivery in flight to a consumer dies with its node's
        connection, however many copies the queue had)."""
        broker, client = spec.get("broker") or {}, spec.get("client") or {}
        return (
            broker.get("queue_type") == "quorum"
            and int(broker.get("replicas", 1)) >= 3
            and bool(client.get("confirms", True))
            and client.get("acks", "auto") == "manual"
        )

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import RabbitmqDriver

        return RabbitmqDriver(address, spec, names, route, client)

    def omb_driver(self) -> Any:
        from .omb import RabbitmqOmb

        return RabbitmqOmb()

    def external_context(self, spec: Any) -> dict[str, Any]:
        return {"queue_type": spec.broker.queue_type, "exchange": spec.broker.exchange}


RABBITMQ = Rabbitmq()

# public name -> module of this package, imported on first use (`systems/exports.py` says why): a cell's nodes
# started outside a cell (`RabbitCluster`, a context manager) and their AMQP URLs, and pika on the asyncio loop
_LAZY = {"RabbitCluster": "nodes", "amqp_urls": "nodes", "call": "connection", "connect": "connection"}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["RABBITMQ", "Rabbitmq", "RabbitmqBroker", "RabbitmqCell", "RabbitmqClient", *_LAZY]
