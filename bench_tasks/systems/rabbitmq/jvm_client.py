"""RabbitMQ's Java client through the JVM worker (`client: {library: java}`; docs/workers.md, "RabbitMQ's Java client").

pika in the Python workers stays the default. With `library: java` the cell's producers, consumers and relays are
the JVM worker (`bench_tasks/jvm/`, transport `rabbitmq`) on `com.rabbitmq:amqp-client`, the client RabbitMQ's
PerfTest uses, so a cell can measure the broker through the client PerfTest measures it with, and two cells that
differ only in `client.library` show what pika costs. The driving process declares the queues, as for pika.

The login (the user and password of an external node's connection) reaches the worker in its environment only,
never in the plan file on disk, and the worker never describes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import BrokerError
from ...jvm.flags import java_path_refusals
from ...paths import cache_dir

JAVA_ROLES = ("producer", "consumer", "relay")
CLIENT = ("com.rabbitmq:amqp-client", "5.38.0")  # the worker is compiled against it (bench_tasks/jvm/worker/pom.xml)
SECRET_ENV = "SIXNINES_RABBITMQ_SECRET"  # RabbitmqTransport.SECRET_ENV: a properties text of the login
# A producer parks until shortly before each intended time, then spins (the worker's default): RabbitMQ's latencies
# on one host are a few hundred microseconds, within reach of a sleeping thread's late wake-up.
WAIT = "park"
REPLICATED = ("quorum", "stream")


def java_refusals(cell: Any) -> list[str]:
    """What a cell on the Java client cannot be (yet), each naming its field."""
    problems = java_path_refusals(cell, "pika", push_clients=True)
    if cell.client.library == "java" and cell.broker.queue_type == "stream":
        problems.append("broker.queue_type 'stream': the Java client's path reads queues, not stream offsets, yet")
    return problems


def plan_settings(cell: Any) -> dict[str, str]:
    """The worker's plan keys: the exchange kind, delivery mode, confirms, acknowledgements and prefetch, and the
    partition a sample is recorded under (0 for a queue with a leader, as the Python driver records it)."""
    b, c = cell.broker, cell.client
    return {
        "rabbitmq.exchange": b.exchange,
        "rabbitmq.persistent": str(b.persistent).lower(),
        "rabbitmq.confirms": str(c.confirms).lower(),
        "rabbitmq.acks": c.acks,
        "rabbitmq.prefetch": str(c.prefetch),
        "rabbitmq.partition": "0" if b.queue_type in REPLICATED else "-1",
    }


def secret_env(access: Mapping[str, Any]) -> dict[str, str]:
    """The login in the worker's environment, as a properties text; a CA file is refused (no TLS on this path
    yet)."""
    if access.get("tls_ca_file"):
        raise BrokerError("client.library java: the JVM worker does not speak TLS to RabbitMQ yet; use library pika")
    if not access.get("username"):
        return {}
    from ...load.contract import properties_text  # the cell model imports this module when a DAG file is parsed

    login = {"username": access["username"], "password": access.get("password") or ""}
    return {SECRET_ENV: properties_text(login)}


def client_jars() -> list[Any]:
    """amqp-client and its runtime dependencies (slf4j's API), fetched from Maven Central on first use."""
    from ...brokers.maven import verified_libs

    artifact, version = CLIENT
    return [verified_libs(artifact, version, cache_dir() / "rabbitmq-java" / version, BrokerError)]


def worker_program(spec: Any, role: str) -> Any:
    """The JVM worker on RabbitMQ's Java client playing `role`, or None (the Python worker) for roles it does not
    play (background traffic, responders)."""
    if spec.client.library != "java" or role not in JAVA_ROLES:
        return None
    from ...jvm.program import jvm_program

    return jvm_program(
        client_jars(), "rabbitmq", plan_settings(spec), spec.client.jvm_flags, WAIT, secret_env=secret_env
    )
