"""Redis's (and Valkey's) Java client through the JVM worker (`client: {library: java}`; docs/workers.md, "Redis's
Java client").

redis-py (asyncio, hiredis) in the Python workers stays the default. With `library: java` the cell's producers,
consumers and relays are the JVM worker (`bench_tasks/jvm/`, transport `redis`) on Lettuce
(`io.lettuce:lettuce-core`), an asynchronous Java client: as redis-py in the Python driver, it sends without
waiting for replies, and an XADD's reply is the acknowledgement. Two cells that differ only in `client.library`
show what redis-py costs; `bench/native_compare.py` sets both beside redis-benchmark. The driving process creates
the stream and its consumer group, as for redis-py.

The server's password (and an ACL user) reaches the worker in its environment only, never in the plan file on disk,
and the worker never describes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import BrokerError
from ...jvm.flags import java_path_refusals
from ...paths import cache_dir

JAVA_ROLES = ("producer", "consumer", "relay")
CLIENT = ("io.lettuce:lettuce-core", "7.7.0.RELEASE")  # the worker is compiled against it (jvm/worker/pom.xml)
SECRET_ENV = "SIXNINES_REDIS_SECRET"  # RedisTransport.SECRET_ENV: a properties text of the login
WAIT = "park"  # round trips on one host are tens of microseconds: park, then spin the last 50 µs


def java_refusals(cell: Any) -> list[str]:
    """What a cell on the Java client cannot be (yet), each naming its field."""
    return java_path_refusals(cell, "redis-py", push_clients=True)


def plan_settings(cell: Any) -> dict[str, str]:
    """The worker's plan keys: pub/sub or streams, the stream's trim and group, and how the group is read."""
    b, c = cell.broker, cell.client
    return {
        "redis.mode": b.mode,
        "redis.maxlen": str(b.stream.maxlen or -1),
        "redis.group": b.stream.group,
        "redis.read_count": str(c.read_count),
        "redis.block_ms": str(c.block_ms),
        "redis.noack": str(c.noack).lower(),
    }


def secret_env(access: Mapping[str, Any]) -> dict[str, str]:
    """The server's password (and ACL user) in the worker's environment, as a properties text; a CA file is refused
    (no TLS on this path yet)."""
    if access.get("ssl_ca_certs"):
        raise BrokerError("client.library java: the JVM worker does not speak TLS to Redis yet; use redis-py")
    login = {k: str(access[k]) for k in ("username", "password") if access.get(k)}
    if not login:
        return {}
    from ...load.contract import properties_text  # the cell model imports this module when a DAG file is parsed

    return {SECRET_ENV: properties_text(login)}


def client_jars() -> list[Any]:
    """Lettuce and its runtime dependencies (Netty, Reactor), fetched from Maven Central on first use."""
    from ...brokers.maven import verified_libs

    artifact, version = CLIENT
    return [verified_libs(artifact, version, cache_dir() / "redis-java" / version, BrokerError)]


def worker_program(spec: Any, role: str) -> Any:
    """The JVM worker on Lettuce playing `role`, or None (the Python worker) for roles it does not play."""
    if spec.client.library != "java" or role not in JAVA_ROLES:
        return None
    from ...jvm.program import jvm_program

    return jvm_program(client_jars(), "redis", plan_settings(spec), spec.client.jvm_flags, WAIT, secret_env=secret_env)
