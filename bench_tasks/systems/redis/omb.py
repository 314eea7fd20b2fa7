"""OMB's Redis driver files in sixnines terms.

OMB's Redis driver (`RedisBenchmarkDriver`, on Jedis) is Redis Streams: a producer XADDs each message to the
topic's stream, untrimmed, and waits for the reply before its next send; a subscription is a consumer group whose
consumers XREADGROUP new entries and never XACK them. The file holds the server's address, a login
(`redisUser`, `redisPass`) and the size of the connection pool its producers share; the server's persistence
is its deployment's, not the file's. The cell is `mode: streams` with an untrimmed stream and NOACK reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...interop.omb_draft import Draft
from ...interop.omb_topics import note_one_route
from ...secrecy import REDACTED

DRIVER_CLASSES = ("io.openmessaging.benchmark.driver.redis.RedisBenchmarkDriver",)
POOL = ("jedisPoolMaxTotal", "jedisPoolMaxIdle")
DRIVER_FIELDS = ("name", "driverClass", "redisHost", "redisPort", "redisUser", "redisPass", *POOL)
_ALWAYS = "(OMB's Redis driver)"  # the account's name for what the driver does whatever its file says


class RedisOmb:
    driver_classes = DRIVER_CLASSES
    driver_fields = DRIVER_FIELDS

    def map_partitions(self, partitions: int, draft: Draft) -> None:
        if partitions == 1:
            draft.note("partitionsPerTopic", partitions, "a stream is one ordered log")
        else:
            draft.warn("partitionsPerTopic", partitions, "a stream has no partitions (OMB's driver ignores it too)")

    def map_keys(self, key: str, keys: str, note: str, draft: Draft) -> None:
        if keys == "none":
            draft.note("keyDistributor", key, "an entry carries the payload only")
        else:
            draft.warn("keyDistributor", key, "OMB adds the key to each entry as a field; sixnines entries carry none")

    def note_subscription(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 1, "one consumer group (XREADGROUP); its consumers share the stream")

    def note_publish_only(self, draft: Draft) -> None:
        draft.note("subscriptionsPerTopic", 0, "the XADD reply is the measured acknowledgement")

    def map_backlog(self, gb: float, messages: int, lagging: int, draft: Draft) -> None:
        draft.refuse("consumerBacklogSizeGB", gb, "a prefilled backlog with lagging consumers is not built for Redis")

    def map_driver(self, driver: Mapping[str, Any], draft: Draft) -> None:
        _as_omb_does(draft)
        for name in ("redisHost", "redisPort"):
            if (value := draft.given(driver, name, "" if name == "redisHost" else 0)) is not None:
                draft.address(f"driver.{name}", str(value), "the Redis server")
        if (user := draft.given(driver, "redisUser", "")) is not None:
            draft.warn("driver.redisUser", user, "the harness's clients log in as the default user (the connection's)")
        if draft.given(driver, "redisPass", "") is not None:
            draft.warn(
                "driver.redisPass",
                REDACTED,
                "a secret: never carried; every provisioned server asks for a password of the cell's own, and an "
                "external one's comes from the connection",
            )
        for name in POOL:
            if (size := draft.given(driver, name, 0)) is not None:
                draft.warn(
                    f"driver.{name}",
                    size,
                    "no equivalent: OMB's producers share a pool of connections; each sixnines producer and "
                    "consumer has a connection of its own",
                )

    def without_driver(self, draft: Draft) -> None:
        _as_omb_does(draft)

    def map_other_topics(self, others: int, partitions: int, subscriptions: int, draft: Draft) -> None:
        note_one_route(others, partitions, "stream", draft)


def _as_omb_does(draft: Draft) -> None:
    """What OMB's Redis driver does whatever its file says."""
    draft.put(_ALWAYS, None, "broker.mode", "streams", "XADD to a stream, read by a consumer group")
    draft.put(
        _ALWAYS,
        None,
        "broker.stream.maxlen",
        None,
        "OMB's XADD never trims, so the stream keeps every entry (memory grows by messages × size)",
    )
    draft.put(
        _ALWAYS,
        None,
        "client.noack",
        True,
        "OMB's consumers never XACK (their pending entries pile up); XREADGROUP NOACK is the nearest: no XACK sent",
    )
    draft.note(
        _ALWAYS,
        None,
        "its producer waits for each XADD reply before sending the next; sixnines sends on schedule, whatever is "
        "awaiting a reply (a rate above one message per round trip per producer is offered in full here). The "
        "server's persistence is not in the file: sixnines' default, no append-only file",
    )
