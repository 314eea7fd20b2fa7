"""Topic administration over the Admin API (librdkafka): create a topic and wait until every partition is led
with a full ISR, delete it, ask who leads each partition; wait until a consumer group's coordinator answers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic, TopicMetadata

from ...brokers.patience import with_patience
from ...errors import BrokerError
from .properties import config_value

_librdkafka_log = logging.getLogger(f"{__name__}.librdkafka")


def admin_client(bootstrap: str, client: Mapping[str, Any] | None = None) -> AdminClient:
    """An AdminClient whose librdkafka log goes to Python logging instead of stderr (refused connections to a
    killed node are expected in fault tests); `client` adds security settings (TLS, SASL)."""
    return AdminClient({"bootstrap.servers": bootstrap, **(client or {}), "logger": _librdkafka_log})


def registered_brokers(admin: AdminClient) -> set[int]:
    """The brokers the cluster's metadata lists once it names a controller (empty before). The Metadata request,
    not DescribeCluster: brokers before 2.8 do not answer the latter."""
    try:
        metadata = admin.list_topics(timeout=2)
    except KafkaException:  # not reachable yet
        return set()
    return set(metadata.brokers) if metadata.controller_id >= 0 else set()


def metadata_controller(bootstrap: str, client: Mapping[str, Any] | None = None, timeout_s: float = 5.0) -> int | None:
    """The controller the cluster's metadata names (None: none now). Under ZooKeeper it is the broker elected in
    ZooKeeper's `/controller`; under KRaft it is a random broker (`quorum.py` reads the real one)."""
    try:
        controller = admin_client(bootstrap, client).list_topics(timeout=timeout_s).controller_id
    except KafkaException as exc:
        raise BrokerError(f"no metadata from {bootstrap}: {exc.args[0]}") from exc
    return controller if controller >= 0 else None


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = 30.0,
    client: Mapping[str, Any] | None = None,
    assignment: list[list[int]] | None = None,
) -> None:
    """Create a topic (topic `config`, e.g. min.insync.replicas, passed through) and wait until every partition
    has a leader and a full ISR, so a measurement never starts against a topic that is still settling.
    `assignment`: each partition's replica node ids, the first its preferred leader (None: the cluster's choice)."""
    timeout_s = with_patience(timeout_s)  # a topic settling is part of a cluster getting ready
    admin = admin_client(bootstrap, client)
    topic_config = {str(k): config_value(v) for k, v in (config or {}).items()}
    if assignment is None:
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=topic_config)
    else:
        new = NewTopic(name, len(assignment), replication_factor=-1, replica_assignment=assignment, config=topic_config)
    try:
        admin.create_topics([new], request_timeout=timeout_s)[name].result(timeout=timeout_s)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise BrokerError(f"could not create topic {name!r}: {exc.args[0]}") from exc
        _accept_existing(admin, name, partitions, replication_factor, assignment, timeout_s)

    def settled(metadata: TopicMetadata | None) -> bool:
        if metadata is None:
            return False
        parts = metadata.partitions
        return len(parts) == partitions and all(
            p.leader >= 0 and len(p.isrs) == replication_factor for p in parts.values()
        )

    _wait_for_topic(admin, name, settled, timeout_s, "every partition to have a leader and a full ISR")


def _accept_existing(
    admin: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int,
    assignment: list[list[int]] | None,
    timeout_s: float,
) -> None:
    """Accept a topic that "already exists" only if it has the shape asked for. Under load, librdkafka resends a
    CreateTopics whose answer was slow, and the resent request meets the topic the first one created: that is
    this request's own topic. A topic of another shape is someone else's, and an error naming what differs."""
    found = _wait_for_topic(admin, name, lambda metadata: metadata is not None, timeout_s, "its metadata")
    assert found is not None  # what the wait waited for
    have = {p.id: list(p.replicas) for p in found.partitions.values()}
    want_partitions = partitions if assignment is None else len(assignment)
    differences = []
    if len(have) != want_partitions:
        differences.append(f"{len(have)} partitions, not {want_partitions}")
    if assignment is None and any(len(replicas) != replication_factor for replicas in have.values()):
        differences.append(f"replicas {sorted(have.items())}, not {replication_factor} per partition")
    if assignment is not None and [have.get(i) for i in range(len(assignment))] != assignment:
        differences.append(f"replicas {sorted(have.items())}, not {assignment}")
    if differences:
        raise BrokerError(f"could not create topic {name!r}: it already exists with " + " and ".join(differences))
    _librdkafka_log.info("topic %r already existed with the shape asked for (a resent CreateTopics)", name)


def partition_leaders(
    bootstrap: str, topic: str, timeout_s: float = 10.0, client: Mapping[str, Any] | None = None
) -> dict[int, int]:
    """Partition → leader node id (-1: no leader), as the metadata of a live broker says now. A topic just
    created may not be in the metadata of the broker asked yet (another one answered its creation): it is asked
    again until `timeout_s`."""
    admin = admin_client(bootstrap, client)
    found = f"the topic in the metadata of {bootstrap}"
    metadata = _wait_for_topic(admin, topic, lambda metadata: metadata is not None, timeout_s, found)
    assert metadata is not None  # what the wait waited for
    return {p.id: p.leader for p in sorted(metadata.partitions.values(), key=lambda p: p.id)}


def delete_topic(bootstrap: str, name: str, timeout_s: float = 30.0, client: Mapping[str, Any] | None = None) -> None:
    """Delete a topic and wait until the metadata no longer lists it, so its name can be reused at once."""
    timeout_s = with_patience(timeout_s)
    admin = admin_client(bootstrap, client)
    try:
        admin.delete_topics([name], request_timeout=timeout_s)[name].result(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"could not delete topic {name!r}: {exc.args[0]}") from exc
    _wait_for_topic(admin, name, lambda metadata: metadata is None, timeout_s, "the topic to disappear")


def _topic_metadata(admin: AdminClient, topic: str, timeout_s: float) -> TopicMetadata | None:
    """The topic's metadata, or None if the cluster does not (yet, or any more) know it."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"no metadata from the cluster: {exc.args[0]}") from exc
    found = metadata.topics.get(topic)
    return None if found is None or found.error is not None else found


def _wait_for_topic(
    admin: AdminClient, name: str, done: Callable[[TopicMetadata | None], bool], timeout_s: float, what: str
) -> TopicMetadata | None:
    """The topic's metadata once `done` accepts it; a BrokerError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        metadata = _topic_metadata(admin, name, max(1.0, deadline - time.monotonic()))
        if done(metadata):
            return metadata
        if time.monotonic() > deadline:
            raise BrokerError(f"topic {name!r}: timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.1)


# A group coordinator that is still taking up its partition of `__consumer_offsets` (created when the first
# client asks for the coordinator) answers with one of these; anything else is an answer.
_COORDINATOR_NOT_READY = frozenset(
    {KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS}
)


def await_group_coordinator(
    bootstrap: str, group: str, timeout_s: float = 10.0, client: Mapping[str, Any] | None = None
) -> None:
    """Wait until the broker coordinating `group` answers for it, before a consumer joins it. A join refused with
    "not coordinator" (the coordinator's offsets partition not led yet: every first consumer of a fresh cluster)
    is retried by librdkafka ~2.2 s later; asked here every 50 ms, the join that follows goes through at once.
    Best effort: any other answer (a group nobody joined yet, a refusal) ends the wait, and so does the timeout;
    the consumer's own join then reports what is wrong."""
    admin = admin_client(bootstrap, client)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            admin.describe_consumer_groups([group], request_timeout=5)[group].result()
            return
        except KafkaException as exc:
            if exc.args[0].code() not in _COORDINATOR_NOT_READY:
                return
        time.sleep(0.05)
