"""OMB's several topics in sixnines terms: one measured topic, and the others as an unmeasured background.

A sixnines cell measures one route (topic, subject, stream or queue): its schedule, its consumers and its message
accounting are per route. An OMB workload of `topics` N loads N topics evenly (producerRate / N each, with
producersPerTopic producers and each subscription's consumerPerSubscription consumers per topic), so the cell
measures one of them at that per-topic rate, and the other N − 1 topics' load runs beside it as the background
workload `other_topics`: (N − 1) × producersPerTopic logical producers, each at OMB's per-producer rate, with the
measured topic's message size, keys and producer config. Logical producers are multiplexed over a few OS processes
(`BACKGROUND_PROCESSES`), as background producers always are, so a thousand of OMB's producers do not measure the
host's scheduler instead of the broker.

Where a system has partitions (`OmbDriver.map_other_topics`), the other topics' partitions are the background
topic's: a broker serves partitions (their logs, leaders and replica fetches), which is most of what many topics
cost it; what is per topic only (metadata, one more topic for the controller to track) is not reproduced.
"""

from __future__ import annotations

from typing import Any

from .omb_draft import Draft
from .omb_driver import OmbDriver

BACKGROUND = "other_topics"
# OS processes the other topics' logical producers (and, each one a process, their consumers) are spread over: a
# few clients beside the measured producers, not one process per OMB producer (two-core hosts run these cells).
BACKGROUND_PROCESSES = 4


def path(field: str) -> str:
    """The matrix path of one of the background's fields."""
    return f"background.{BACKGROUND}.{field}"


def map_other_topics(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    """The N − 1 topics OMB loads beside the measured one, as the background `other_topics` (nothing for one
    topic), and what of several subscriptions is not carried. Runs after the driver mapping: the background takes
    the measured topic's producer and topic config."""
    if w["topics"] > 1:
        _map_background(w, draft, omb)
    _warn_extra_subscriptions(w, draft)


def _map_background(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    topics, per_topic = w["topics"], w["producersPerTopic"]
    others = topics - 1
    producers = others * per_topic
    draft.put(
        "topics",
        topics,
        path("producers"),
        producers,
        f"the other {others} topics' producers, producersPerTopic {per_topic} each: logical producers, each with "
        "its own schedule; unmeasured, counted",
    )
    draft.put(
        "topics",
        topics,
        path("processes"),
        min(producers, BACKGROUND_PROCESSES),
        f"OS processes the logical producers are multiplexed over (at most {BACKGROUND_PROCESSES}, one client "
        "each); raise it in the matrix if the background's send lag grows",
    )
    draft.put("messageSize", w["messageSize"], path("message_size_bytes"), w["messageSize"], "as the measured topic")
    _map_background_rate(w, draft)
    omb.map_other_topics(others, w["partitionsPerTopic"], max(w["subscriptionsPerTopic"], 1), draft)
    _map_background_readers(w, draft)  # after the system: how many subscriptions it reads


def _map_background_rate(w: dict[str, Any], draft: Draft) -> None:
    """Each logical producer at OMB's per-producer rate: the measured topic's rate over its producers. In the
    max-rate search the background follows every step's rate (`follows_rate`), as OMB raises all topics at once."""
    rate = draft.workload["rate_per_s"]
    each = rate / w["producersPerTopic"]
    if w["producerRate"] == 0:
        draft.put(
            "producerRate",
            0,
            path("rate_per_producer_per_s"),
            each,
            "the per-producer rate of the search's first step (OMB's 10,000 msg/s over all producers)",
        )
        draft.put(
            "producerRate",
            0,
            path("follows_rate"),
            True,
            "every step of the capacity search scales the other topics' rate with the measured topic's: OMB's search "
            "raises the rate of all its topics together",
        )
        return
    draft.put(
        "producerRate",
        w["producerRate"],
        path("rate_per_producer_per_s"),
        each,
        f"producerRate / topics / producersPerTopic: OMB's rate of each producer ({rate:g} msg/s per topic)",
    )


def _map_background_readers(w: dict[str, Any], draft: Draft) -> None:
    """The other topics' subscriptions read by unmeasured consumers (each an OS process), at most
    `BACKGROUND_PROCESSES` of them over all subscriptions."""
    consumers, subscriptions = w["consumerPerSubscription"], w["subscriptionsPerTopic"]
    if subscriptions < 1:
        draft.put("subscriptionsPerTopic", 0, path("consumers"), 0, "no subscription: the other topics are not read")
        return
    wanted = (w["topics"] - 1) * consumers
    most = max(1, BACKGROUND_PROCESSES // draft.background[BACKGROUND].get("subscriptions", 1))
    draft.put(
        "consumerPerSubscription",
        consumers,
        path("consumers"),
        min(wanted, most),
        f"OMB's {wanted} consumers of each of the other topics' subscriptions, as at most {most} unmeasured "
        f"consumers (an OS process each, {BACKGROUND_PROCESSES} at most over all subscriptions read) in one group "
        "per subscription read, each group reading all of the other topics' messages",
    )


def _warn_extra_subscriptions(w: dict[str, Any], draft: Draft) -> None:
    """A cell's measured route has one subscription, its measured consumers; OMB's further subscriptions of the
    measured topic are not read, and those of the other topics only where the system carries them."""
    subscriptions = w["subscriptionsPerTopic"]
    if subscriptions <= 1:
        return
    extra = subscriptions - 1
    carried = draft.background.get(BACKGROUND, {}).get("subscriptions", 1) > 1
    others = (
        f"the other topics' {subscriptions} subscriptions are read (`{path('subscriptions')}`), the measured topic's "
        f"other {extra} are not: 1/{w['topics']} of OMB's extra deliveries are not made"
        if carried
        else f"the cell reads one (its measured consumers, and one group on the other topics): the other {extra} "
        "subscriptions' deliveries, which load the broker too, are not made"
    )
    draft.warn(
        "subscriptionsPerTopic",
        subscriptions,
        f"OMB delivers every message to each of {subscriptions} subscriptions; " + others,
    )


def note_one_route(others: int, partitions: int, route: str, draft: Draft) -> None:
    # Several subscriptions are not carried on these systems' background: `_warn_extra_subscriptions` says so.
    """A system without partitions: the other topics' messages go to one background route of its kind."""
    draft.note(
        "topics",
        others + 1,
        f"the other {others} topics' messages share one background {route}: the broker's per-{route} costs of "
        f"{others} more {route}s are not reproduced, their messages and deliveries are",
    )
    if partitions > 1:
        draft.note("partitionsPerTopic", partitions, f"the background {route} has no partitions either")
