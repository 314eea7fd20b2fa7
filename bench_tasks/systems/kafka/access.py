"""Reaching a Kafka cluster the cell does not own: the Airflow connection as librdkafka settings, what the cluster
says it is, the cell's topics and consumer groups (deleted at teardown), and the topic whose leaders are watched.

Connection fields: host/port (or extra `bootstrap_servers`, a list or a comma-separated string; or extra `listeners`,
a map of security protocol -> bootstrap servers for clusters with one listener per protocol) -> `bootstrap.servers`;
login/password -> SASL username/password; extras `security_protocol`, `sasl_mechanism`, `ssl_ca_location` (a CA
file) and `config` (more librdkafka settings, verbatim).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...brokers.connections import BrokerConnection, ClientAccess
from ...errors import BrokerError
from .settings import KafkaCell

KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_KAFKA_PORT = 9092


def client_access(conn: BrokerConnection, spec: KafkaCell) -> ClientAccess:
    return kafka_access(conn, spec.client.security, spec.client.sasl_mechanism)


def kafka_access(conn: BrokerConnection, security: str | None = None, mechanism: str | None = None) -> ClientAccess:
    """librdkafka settings for `conn`; the cell's `client.security`/`client.sasl_mechanism` win over the
    connection's extras, which win over plaintext/PLAIN."""
    extra = conn.extra
    where = f"connection {conn.conn_id!r}"
    protocol = (security or extra.get("security_protocol") or "plaintext").upper()
    if protocol not in KAFKA_PROTOCOLS:
        raise BrokerError(
            f"{where}: extra.security_protocol {protocol!r} — expected one of {', '.join(KAFKA_PROTOCOLS)}"
        )
    listeners = extra.get("listeners") or {}
    if not isinstance(listeners, dict):
        raise BrokerError(f"{where}: extra.listeners must map a security protocol to bootstrap servers")
    listeners = {str(k).upper(): v for k, v in listeners.items()}
    servers = listeners.get(protocol) or extra.get("bootstrap_servers")
    if servers:
        address = servers if isinstance(servers, str) else ",".join(str(s) for s in servers)
    elif conn.host:
        address = f"{conn.host}:{conn.port or DEFAULT_KAFKA_PORT}"
    else:
        raise BrokerError(f"{where}: no host (and no extra.bootstrap_servers) for protocol {protocol}")
    client: dict[str, Any] = {"security.protocol": protocol}
    described: dict[str, Any] = {
        "connection": conn.conn_id,
        "bootstrap_servers": address,
        "security_protocol": protocol,
    }
    if protocol.startswith("SASL"):
        chosen = mechanism or extra.get("sasl_mechanism") or "PLAIN"
        if chosen not in KAFKA_MECHANISMS:
            raise BrokerError(
                f"{where}: extra.sasl_mechanism {chosen!r} — expected one of {', '.join(KAFKA_MECHANISMS)}"
            )
        if not conn.login or conn.password is None:
            raise BrokerError(f"{where}: login and password are required for security protocol {protocol}")
        client |= {"sasl.mechanism": chosen, "sasl.username": conn.login, "sasl.password": conn.password}
        described |= {"sasl_mechanism": chosen, "sasl_username": conn.login}
    ca = extra.get("ssl_ca_location")
    if protocol.endswith("SSL") and ca:
        client["ssl.ca.location"] = str(ca)
        described["ssl_ca_location"] = str(ca)
    more = extra.get("config") or {}
    if not isinstance(more, dict):
        raise BrokerError(f"{where}: extra.config must be a map of librdkafka settings")
    client |= {str(k): str(v) for k, v in more.items()}
    described["config_keys"] = sorted(str(k) for k in more)  # names only: values may be secrets
    return ClientAccess(address, client, described)


def ask_version(address: str, client: Mapping[str, Any], spec: KafkaCell | None = None) -> dict[str, Any]:
    """The cluster's own word on its version. The probe is a separate JVM tool: if it cannot run, the cell still
    runs (topic creation proves the cluster answers) and the context says `unknown` and why."""
    from .probe import reported_version

    try:
        return reported_version(address, client)
    except BrokerError as exc:
        return {"version": "unknown", "version_error": str(exc)}


def route_names(spec: KafkaCell, names: str) -> list[str]:
    """Every topic the cell uses (the measured one, a chain's second hop, background ones)."""
    from ...load.routes import route_keys
    from .driver import topic_for

    return [topic_for(names, route) for route in route_keys(spec)]


def delete_routes(address: str, client: Mapping[str, Any], spec: KafkaCell, names: str) -> list[str]:
    """Delete the cell's topics that exist, and its consumer groups; returns the topics deleted."""
    from .admin import admin_client, delete_topic

    topics = route_names(spec, names)
    try:
        existing = set(admin_client(address, client).list_topics(timeout=15).topics)
    except Exception as exc:
        raise BrokerError(f"cannot list topics on {address}: {exc}") from exc
    gone = [name for name in topics if name in existing]
    for name in gone:
        delete_topic(address, name, client=client)
    _delete_groups(address, client, topics)
    return gone


def _delete_groups(address: str, client: Mapping[str, Any], topics: list[str]) -> None:
    """The cell's consumer groups (named after its topics: the topic, `-lagging`, a background's further
    subscriptions `-s1`, `-s2`, …) would otherwise linger on the cluster until offsets.retention.minutes; they are
    empty once the cell's consumers closed."""
    from .admin import admin_client

    admin = admin_client(address, client)
    try:
        listed = admin.list_consumer_groups(request_timeout=15).result(timeout=20)
    except Exception as exc:
        raise BrokerError(f"cannot list consumer groups on {address}: {exc}") from exc
    groups = sorted(g.group_id for g in listed.valid if group_of(g.group_id, topics))
    for group, future in (admin.delete_consumer_groups(groups, request_timeout=15) if groups else {}).items():
        try:
            future.result(timeout=20)
        except Exception as exc:
            raise BrokerError(f"could not delete consumer group {group!r}: {exc}") from exc


def group_of(group: str, topics: list[str]) -> bool:
    """Whether `group` is one the cell's consumers form on these topics: the topic's own, `-lagging`, or a
    background's further subscription (`-s1`, `-s2`, …)."""
    topic, _, number = group.rpartition("-s")
    return group in topics or group.removesuffix("-lagging") in topics or (topic in topics and number.isdigit())
