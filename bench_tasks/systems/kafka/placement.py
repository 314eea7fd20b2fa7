"""Placing a topic's leader on one node (`broker.leader: node:N`): the topic is created with node N first in every
partition's replica list, so N is every partition's preferred leader and, with all replicas in sync at creation,
its leader. Should another node lead partition 0 once the topic has settled (N was briefly out of the ISR), a
preferred-leader election moves it back; a partition 0 still led elsewhere after that fails the cell before any
message is sent, naming the actual leader.

Every partition is led by N (not only partition 0, the measured route's watched one): seed 001 compared brokers
as leaders of the whole topic. Followers are the nodes after N in turn (N=3 of 3, RF 3: replicas [3, 1, 2]).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import ElectionType, KafkaException, TopicPartition

from ...errors import BrokerError
from .admin import admin_client, partition_leaders

ELECTION_TIMEOUT_S = 15.0


def leader_assignment(brokers: int, partitions: int, replication_factor: int, leader: int) -> list[list[int]]:
    """Each partition's replicas (node ids 1..brokers): `leader` first, then the nodes after it in turn."""
    nodes = [(leader - 1 + k) % brokers + 1 for k in range(replication_factor)]
    return [list(nodes) for _ in range(partitions)]


def ensure_leader(
    bootstrap: str,
    topic: str,
    leader: int,
    client: Mapping[str, Any] | None = None,
    timeout_s: float = ELECTION_TIMEOUT_S,
) -> None:
    """Partition 0 of `topic` led by node `leader`, after a preferred-leader election where it is not; else a
    BrokerError naming who leads it."""
    leaders = partition_leaders(bootstrap, topic, timeout_s, client)
    if leaders.get(0) == leader:
        return
    _elect_preferred(bootstrap, topic, sorted(leaders), client, timeout_s)
    deadline = time.monotonic() + timeout_s
    while (actual := partition_leaders(bootstrap, topic, timeout_s, client).get(0)) != leader:
        if time.monotonic() > deadline:
            raise BrokerError(
                f"broker.leader node:{leader}: partition 0 of topic {topic!r} is led by node {actual} after a "
                f"preferred-leader election (waited {timeout_s:.0f}s)"
            )
        time.sleep(0.1)


def _elect_preferred(
    bootstrap: str, topic: str, partitions: list[int], client: Mapping[str, Any] | None, timeout_s: float
) -> None:
    """Ask the controller to hand each partition to its preferred (first) replica; a partition already led by
    it answers ELECTION_NOT_NEEDED, which is no error."""
    admin = admin_client(bootstrap, client)
    wanted = [TopicPartition(topic, p) for p in partitions]
    try:
        # No request_timeout: confluent-kafka 2.16 refuses any keyword here (SystemError in its C argument parsing).
        results = admin.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout_s)
    except KafkaException as exc:
        raise BrokerError(f"topic {topic!r}: preferred-leader election refused: {exc.args[0]}") from exc
    for tp, error in (results or {}).items():
        if error is not None and "ELECTION_NOT_NEEDED" not in str(error):
            raise BrokerError(f"topic {topic!r} partition {tp.partition}: preferred-leader election failed: {error}")
