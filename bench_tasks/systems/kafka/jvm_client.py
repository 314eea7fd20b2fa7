"""Kafka's Java client through the JVM worker (`client: {library: java}`; docs/workers.md, "Kafka's Java client").

librdkafka (confluent-kafka, in the Python workers) stays the default. With `library: java` the cell's producers,
consumers and relays are the JVM worker (`bench_tasks/jvm/`, transport `kafka`) running on the cell's own release's
`kafka-clients` jar and its runtime dependencies (lz4, snappy, zstd, slf4j's API: no logging backend, so the
client's log lines go nowhere and its errors are counted where they reach the worker: a refused send, a failed
poll). Background traffic stays on librdkafka.

The matrix's `client.producer` and `client.consumer` maps are the Java client's properties, passed through
untouched. A setting whose name says it is secret (`secrecy.is_secret`: a `sasl.jaas.config`) and the cell's
client access (its target's TLS and SASL settings, librdkafka's spelling turned into the Java client's by
`probe.java_client_properties`) reach the worker in its environment only, never in the plan file on disk, and
the worker never describes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import BrokerError
from ...jvm.flags import java_path_refusals
from ...secrecy import is_secret
from .properties import config_value, render_properties

JAVA_ROLES = ("producer", "consumer", "relay")
# A producer sleeps until each intended time, never spins: Kafka's latencies are milliseconds (linger.ms, fetches),
# and on a small host a spinning producer takes the core its own client's I/O thread and the consumer need.
WAIT = "sleep"
SECRET_ENV = "SIXNINES_KAFKA_SECRET"  # KafkaTransport.SECRET_ENV: a properties text of the secret plan keys
# kafka-clients and its runtime dependencies (its pom's runtime scope), by jar name in a release's libs folder.
CLIENT_JARS = ("kafka-clients-", "lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")


def java_refusals(cell: Any) -> list[str]:
    """What a cell on the Java client cannot be (yet), each naming its field; JVM flags only for the Java client."""
    c, w = cell.client, cell.workload
    problems = java_path_refusals(cell, "librdkafka")
    if c.library != "java":
        return problems
    if c.consumer_mode != "group":
        problems.append(
            f"client.consumer_mode {c.consumer_mode!r}: the Java client's receivers join the route's group; use group"
        )
    if w.lagging_consumers:
        problems.append("workload.lagging_consumers: lagging consumers run on librdkafka only; not with library java")
    return problems


def plan_settings(client: Any) -> dict[str, str]:
    """The worker's plan keys for the cell's client settings: the key scheme, where a receiver starts, and every
    producer and consumer property whose name is not secret."""
    settings = {"kafka.keys": client.keys, "kafka.start_from": client.start_from}
    for kind, props in (("producer", client.producer), ("consumer", client.consumer)):
        settings |= {f"kafka.{kind}.{k}": config_value(v) for k, v in props.items() if not is_secret(k)}
    return settings


def secret_env(client: Any, access: Mapping[str, Any]) -> dict[str, str]:
    """The environment that carries the secret settings: the matrix's secret properties, and the cell's client
    access (librdkafka settings) as the Java client spells it, as one properties text."""
    from .probe import java_client_properties

    keys = {f"kafka.common.{k}": v for k, v in java_client_properties(access).items()}
    for kind, props in (("producer", client.producer), ("consumer", client.consumer)):
        keys |= {f"kafka.{kind}.{k}": config_value(v) for k, v in props.items() if is_secret(k)}
    return {SECRET_ENV: render_properties(keys)} if keys else {}


def client_jars(version: str) -> list[Path]:
    """The release's kafka-clients jar and its runtime dependencies, from the verified release folder."""
    from .release import kafka_classpath

    libs = kafka_classpath(version)
    jars = sorted(p for p in libs.glob("*.jar") if p.name.startswith(CLIENT_JARS))
    if not any(p.name.startswith("kafka-clients-") for p in jars):
        raise BrokerError(f"Kafka {version}: no kafka-clients jar in {libs}")
    return jars


def worker_program(spec: Any, role: str, version: str) -> Any:
    """The JVM worker on `version`'s Java client playing `role`, or None (the Python worker) for roles it does not
    play (background traffic)."""
    if spec.client.library != "java" or role not in JAVA_ROLES:
        return None
    from ...jvm.program import jvm_program

    access: Callable[[Mapping[str, Any]], dict[str, str]] = partial(secret_env, spec.client)
    settings = plan_settings(spec.client)
    return jvm_program(client_jars(version), "kafka", settings, spec.client.jvm_flags, WAIT, secret_env=access)
