"""OpenMessaging Benchmark workload (and driver) files → a sixnines matrix.

OMB describes one test as a workload file (`messageSize`, `producerRate`, `topics`, …, the fields of its
`Workload` class) plus a driver file per system, whose fields each system maps itself (`System.omb_driver`,
`systems/<name>/omb.py`). `import_omb` maps each field onto the
matrix, records the mapping of every field it read (the matrix's `origin:`, which travels with each cell
into its result.json), warns about every field it cannot carry and refuses what sixnines cannot measure
faithfully, with the reason and the numbers. OMB's max-rate mode (producerRate 0) becomes the matrix's
`capacity:` search, held to what OMB calls sustainable. Several topics: the cell measures one at OMB's rate per
topic and the others load the broker beside it as an unmeasured background (`omb_topics`), which follows a
search's rate. Several subscriptions: the measured topic has one (the others are a warning); on Kafka the
background's consumer groups read the other topics once per subscription.

Pure: it takes already-parsed mappings and returns the matrix; reading files is the CLI's job.
docs/interop.md has the mapping table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from ..capacity.search import max_search_steps
from ..core.header import HEADER_SIZE
from ..errors import InteropError, MatrixError
from ..spec.capacity import CapacitySpec
from ..spec.matrix import parse_matrix
from ..spec.matrix_model import Matrix
from .omb_draft import Draft, Mapped, type_problem
from .omb_driver import OmbDriver
from .omb_topics import map_other_topics

# The fields of OMB's Workload class, with the defaults its Java fields start with.
WORKLOAD_DEFAULTS: dict[str, Any] = {
    "name": None,
    "topics": 0,
    "partitionsPerTopic": 0,
    "keyDistributor": "NO_KEY",
    "messageSize": 0,
    "useRandomizedPayloads": False,
    "randomBytesRatio": 0.0,
    "randomizedPayloadPoolSize": 0,
    "payloadFile": None,
    "subscriptionsPerTopic": 0,
    "producersPerTopic": 0,
    "consumerPerSubscription": 0,
    "producerRate": 0,
    "consumerBacklogSizeGB": 0,
    "backlogDrainRatio": 1.0,
    "testDurationMinutes": 0,
    "warmupDurationMinutes": 1,
}
KEY_DISTRIBUTORS = {"NO_KEY": "none", "KEY_ROUND_ROBIN": "round_robin", "RANDOM_NANO": "random"}
GIB = 1024**3
HIGH_RATE_PER_S = 1_000_000  # OMB's max-rate workloads ask for 10 M msg/s: far past any open-loop generator
# What a rate must hold for OMB's max-rate search to keep it: fewer than 1000 messages published and not yet received.
OMB_SUSTAINABLE = "backlog p99 < 1000 msgs"
# OMB's max-rate mode (producerRate 0) as a capacity search (`_map_max_rate`): each matrix path, its value and why.
MAX_RATE_SEARCH: tuple[tuple[str, Any, str], ...] = (
    ("workload.rate_per_s", 10_000, "OMB's max-rate search starts at 10,000 msg/s"),
    (
        "capacity.objectives",
        [OMB_SUSTAINABLE],
        "OMB holds a rate while fewer than 1000 messages are published and not yet received (its receive backlog "
        "limit); it looks every 3 s, so a momentary pile-up seldom counts: here the backlog stays under 1000 for "
        "99 % of each step's measure phase",
    ),
    (
        "capacity.max_rate_per_s",
        10_000_000,
        "OMB's search has no ceiling; this is the rate OMB's own max-rate workload files ask for",
    ),
    ("capacity.factor", 2.0, "OMB's largest ramp doubles the rate"),
    (
        "capacity.resolution",
        0.05,
        "OMB narrows its ramp to 1 %; each step here is a whole cell, and 0.01 (OMB's) costs three more steps",
    ),
    (
        "workload.allowed_loss_ratio",
        0.0,
        "nothing lost: a step that loses a message or has one refused fails (`loss`), as a lost message keeps "
        "OMB's backlog from draining",
    ),
)

# The search's rates that are OMB's totals over all topics: a cell of several topics searches one topic's share.
PER_TOPIC_RATES = ("workload.rate_per_s", "capacity.max_rate_per_s")


@dataclass(frozen=True)
class ImportOptions:
    """What an OMB file does not say, or what a user overrides (each override is recorded in the mapping)."""

    system: str | None = None  # the system to map onto when no driver file says it
    version: str = "latest"
    name: str | None = None
    warmup_s: float | None = None
    measure_s: float | None = None
    cooldown_s: float = 1.0


@dataclass(frozen=True)
class Imported:
    """The matrix as a mapping (what `matrix_yaml` writes), validated, with the account of every field."""

    raw: dict[str, Any]
    matrix: Matrix
    mapped: list[Mapped]
    warnings: list[str]


def import_omb(
    workload: Mapping[str, Any],
    workload_source: str,
    driver: Mapping[str, Any] | None = None,
    driver_source: str | None = None,
    options: ImportOptions = ImportOptions(),
) -> Imported:
    """The sixnines matrix of one OMB workload (and driver). InteropError lists every field that cannot be
    imported, each with its file; a matrix the importer built but sixnines refuses is a MatrixError."""
    system, omb = _system(driver, driver_source, options, workload_source)
    draft = Draft(workload_source, driver_source, system)
    fields = _workload_fields(workload, draft)
    typed = not any(" — must be " in p for p in draft.problems)  # unknown keys are listed with the rest
    if typed:
        _map_workload(fields, draft, options, omb)
    if driver is not None and typed:
        _driver_keys(driver, draft, omb)
        omb.map_driver(driver, draft)
    if draft.problems:
        raise InteropError(workload_source, draft.problems)
    if driver is None:
        omb.without_driver(draft)
    map_other_topics(fields, draft, omb)  # after the driver: the other topics take the measured one's config
    raw = _matrix_mapping(fields, draft, options)
    try:
        matrix = parse_matrix(raw, workload_source)
    except MatrixError as exc:
        raise InteropError(workload_source, [f"the imported matrix is not valid: {p}" for p in exc.problems]) from None
    return Imported(raw, matrix, draft.mapped, draft.warnings)


def _system(
    driver: Mapping[str, Any] | None, source: str | None, options: ImportOptions, workload_source: str
) -> tuple[str, OmbDriver]:
    """The system the workload maps onto and its OMB driver: the option's when its driver reads the file's
    `driverClass` (two systems may: one server speaking another's protocol), else the first that does, else
    (no file) the option's."""
    drivers = _omb_drivers()
    if driver is None:
        if options.system not in drivers:
            known = ", ".join(drivers)
            raise InteropError(
                workload_source, [f"{_named(options.system)}: give --driver, or --system one of {known}"]
            )
        return options.system, drivers[options.system]
    driver_class = driver.get("driverClass")
    chosen = drivers.get(str(options.system))  # a system that reads the same driver (`--system`) comes first
    if chosen is not None and driver_class in chosen.driver_classes:
        return str(options.system), chosen
    for name, omb in drivers.items():
        if driver_class in omb.driver_classes:
            return name, omb
    known = ", ".join(f"{c} ({name})" for name, omb in drivers.items() for c in omb.driver_classes)
    raise InteropError(str(source), [f"driverClass: {driver_class!r} — no sixnines system for it; known: {known}"])


def _named(system: str | None) -> str:
    return "no system given" if system is None else f"no OMB mapping for system {system!r}"


def _omb_drivers() -> dict[str, OmbDriver]:
    from ..systems import SYSTEMS

    return {name: omb for name, system in SYSTEMS.items() if (omb := system.omb_driver()) is not None}


def _workload_fields(workload: Mapping[str, Any], draft: Draft) -> dict[str, Any]:
    """OMB's defaults overlaid with the file; unknown keys refused (OMB's own reader refuses them too)."""
    for key, value in workload.items():
        if key in WORKLOAD_DEFAULTS and (problem := type_problem(WORKLOAD_DEFAULTS[key], value)) is not None:
            draft.refuse(key, value, problem)
    if draft.problems:
        return dict(WORKLOAD_DEFAULTS)
    for key, value in workload.items():
        if key not in WORKLOAD_DEFAULTS:
            draft.refuse(key, value, f"not a field of OMB's Workload; known: {', '.join(WORKLOAD_DEFAULTS)}")
    return {**WORKLOAD_DEFAULTS, **{k: v for k, v in workload.items() if k in WORKLOAD_DEFAULTS}}


def _map_workload(w: dict[str, Any], draft: Draft, options: ImportOptions, omb: OmbDriver) -> None:
    _map_topics(w, draft, omb)
    _map_sizes_and_keys(w, draft, omb)
    _map_clients(w, draft, omb)
    _map_rate(w, draft)
    _map_durations(w, draft, options)
    _note_search_length(draft)
    _map_payload(w, draft)
    _map_backlog(w, draft, omb)


def _map_topics(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    topics, partitions = w["topics"], w["partitionsPerTopic"]
    if topics < 1:
        draft.refuse("topics", topics, "a workload needs at least 1 topic")
    elif topics > 1:
        draft.note(
            "topics",
            topics,
            "the cell measures one of the topics (a cell's schedule, consumers and accounting are per route), at "
            f"OMB's rate per topic; the other {topics - 1} load the broker beside it as the unmeasured background "
            "`other_topics`",
        )
    else:
        draft.note("topics", topics, "one route (topic, subject or stream) per cell")
    if partitions < 1:
        draft.refuse("partitionsPerTopic", partitions, "at least 1")
    else:
        omb.map_partitions(partitions, draft)


def _map_sizes_and_keys(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    size = w["messageSize"]
    if size < HEADER_SIZE:
        draft.refuse("messageSize", size, f"smaller than the {HEADER_SIZE}-byte header every sixnines message carries")
    else:
        draft.put("messageSize", size, "workload.message_size_bytes", size)
    key = w["keyDistributor"]
    if key not in KEY_DISTRIBUTORS:
        draft.refuse("keyDistributor", key, f"unknown; OMB's are {', '.join(KEY_DISTRIBUTORS)}")
    else:
        note = {
            "KEY_ROUND_ROBIN": "OMB cycles a fixed set of keys; sixnines round_robin spreads messages over the "
            "partitions in turn, the effect that key set has",
            "RANDOM_NANO": "a random key per message",
        }.get(key, "")
        omb.map_keys(key, KEY_DISTRIBUTORS[key], note, draft)


def _map_clients(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    producers, subscriptions, consumers = (
        w["producersPerTopic"],
        w["subscriptionsPerTopic"],
        w["consumerPerSubscription"],
    )
    if producers < 1:
        draft.refuse("producersPerTopic", producers, "at least 1 producer")
    else:
        draft.put("producersPerTopic", producers, "workload.producers", producers)
    if subscriptions == 0:
        draft.measurement = "publish"
        draft.put("subscriptionsPerTopic", 0, "workload.consumers", 0, "no subscription: publish latency only")
        if consumers:
            draft.warn("consumerPerSubscription", consumers, "there is no subscription to put them in")
    elif consumers < 1:
        draft.refuse("consumerPerSubscription", consumers, "a subscription needs at least 1 consumer")
    else:
        omb.note_subscription(draft)
        draft.put("consumerPerSubscription", consumers, "workload.consumers", consumers)
    if draft.measurement == "publish":
        omb.note_publish_only(draft)


def _map_rate(w: dict[str, Any], draft: Draft) -> None:
    rate = w["producerRate"]
    if rate < 0:
        draft.refuse("producerRate", rate, "a rate of messages per second, or 0 for OMB's max-rate search")
        return
    if rate == 0:
        _map_max_rate(w, draft)
        return
    topics = max(w["topics"], 1)
    if topics == 1:
        draft.put("producerRate", rate, "workload.rate_per_s", rate, "the total over all producers, as in OMB")
    else:
        draft.put(
            "producerRate",
            rate,
            "workload.rate_per_s",
            rate / topics,
            f"OMB's rate per topic (producerRate / topics {topics}): the measured topic's, over its producers",
        )
    if rate >= HIGH_RATE_PER_S:
        draft.warnings.append(
            f"producerRate: {rate} — an open-loop schedule this fast will outrun the generator on most hosts; "
            "the cell then fails its schedule-lag gate instead of reporting a number. To find the highest rate "
            f"the system holds, search it: `sixnines capacity MATRIX --slo '{OMB_SUSTAINABLE}'` (or import the "
            "workload with producerRate: 0)"
        )


def _map_max_rate(w: dict[str, Any], draft: Draft) -> None:
    """OMB's max-rate mode (producerRate 0) as a capacity search: OMB starts at 10,000 msg/s and raises the rate
    (up to doubling it every 3 s) while fewer than 1000 messages are published and not yet received, backing off
    as soon as more are; a lost message stays unreceived, so it ends a sustainable rate too. Here each rate is a
    whole cell, geometric steps then bisection, held to the same backlog bound and to losing nothing."""
    if w["consumerBacklogSizeGB"] > 0:
        draft.refuse(
            "producerRate",
            0,
            "OMB's max-rate search cannot run while a backlog is built (OMB refuses it too: \"Cannot probe producer "
            'sustainable rate when building backlog"); set producerRate or consumerBacklogSizeGB: 0',
        )
        return
    topics = max(w["topics"], 1)
    for path, value, note in MAX_RATE_SEARCH:
        if topics > 1 and path in PER_TOPIC_RATES:
            value, note = value / topics, f"{note}; per topic (/ topics {topics}): the search is the measured topic's"
        draft.put("producerRate", 0, path, value, note)
    if topics > 1:
        draft.note(
            "producerRate",
            0,
            f"the capacity found is one topic's rate: OMB's total is {topics} times it, the other topics following "
            "every step as background",
        )


def _note_search_length(draft: Draft) -> None:
    """How long the search can take: every step runs a whole cell (warmup and measure), on fresh brokers."""
    if not draft.capacity:
        return
    spec = CapacitySpec.model_validate(draft.capacity)
    steps = max_search_steps(spec, [draft.workload["rate_per_s"]])
    each = draft.workload.get("warmup_s", 0) + draft.workload.get("measure_s", 0)
    draft.note(
        "producerRate",
        0,
        f"a search of at most {steps} steps, each a whole cell of {each:g} s (warmup and measure phase) on fresh "
        f"brokers: up to {steps * each / 60:.0f} min; --warmup-s and --measure-s shorten every step",
    )


def _map_durations(w: dict[str, Any], draft: Draft, options: ImportOptions) -> None:
    minutes, warmup = w["testDurationMinutes"], w["warmupDurationMinutes"]
    if minutes <= 0 and options.measure_s is None:
        draft.refuse("testDurationMinutes", minutes, "OMB would run until stopped; a cell needs a measure duration")
    elif minutes > 0:
        _put_duration(draft, "testDurationMinutes", minutes, "workload.measure_s", options.measure_s)
    _put_duration(draft, "warmupDurationMinutes", warmup, "workload.warmup_s", options.warmup_s)
    draft.workload["cooldown_s"] = options.cooldown_s  # OMB stops at once; sixnines keeps load past measure


def _put_duration(draft: Draft, omb: str, minutes: float, path: str, override: float | None) -> None:
    if override is None:
        draft.put(omb, minutes, path, minutes * 60, "minutes → seconds")
    else:
        draft.put(omb, minutes, path, override, f"{minutes * 60:g} s overridden by the importer's option")


def _map_payload(w: dict[str, Any], draft: Draft) -> None:
    """sixnines payloads are the 32-byte header plus fresh random bytes per message (incompressible)."""
    if w["useRandomizedPayloads"]:
        ratio = w["randomBytesRatio"]
        if ratio >= 1:
            draft.note("randomBytesRatio", ratio, "all random, as sixnines payloads are")
        else:
            draft.warn(
                "randomBytesRatio",
                ratio,
                f"OMB makes {1 - ratio:.0%} of each payload zeros, which compresses; sixnines payloads are all "
                "random bytes, so numbers with compression.type set differ from OMB's",
            )
        draft.note("useRandomizedPayloads", True, "workload.payload random")
        if w["randomizedPayloadPoolSize"]:
            draft.note(
                "randomizedPayloadPoolSize",
                w["randomizedPayloadPoolSize"],
                "sixnines draws fresh random bytes for every message rather than from a pool",
            )
    elif w["payloadFile"]:
        draft.warn(
            "payloadFile",
            w["payloadFile"],
            "not read: sixnines sends its header plus random bytes up to messageSize (a file's content cannot "
            "carry the timing header)",
        )
    for name in ("randomBytesRatio", "randomizedPayloadPoolSize") if not w["useRandomizedPayloads"] else ():
        if w[name] != WORKLOAD_DEFAULTS[name]:
            draft.note(name, w[name], "applies only with useRandomizedPayloads: true (it is false)")
    draft.workload["payload"] = "random"


def _map_backlog(w: dict[str, Any], draft: Draft, omb: OmbDriver) -> None:
    gb, drain = w["consumerBacklogSizeGB"], w["backlogDrainRatio"]
    if gb <= 0:
        if drain != WORKLOAD_DEFAULTS["backlogDrainRatio"]:
            draft.note("backlogDrainRatio", drain, "applies only with consumerBacklogSizeGB > 0")
        return
    size = draft.workload.get("message_size_bytes") or HEADER_SIZE
    omb.map_backlog(gb, math.ceil(gb * GIB / size), max(1, int(w["consumerPerSubscription"])), draft)
    if drain != WORKLOAD_DEFAULTS["backlogDrainRatio"]:
        draft.warn("backlogDrainRatio", drain, "no equivalent: lagging consumers read for the whole cell")


def _driver_keys(driver: Mapping[str, Any], draft: Draft, omb: OmbDriver) -> None:
    known = omb.driver_fields
    for key, value in driver.items():
        if key not in known:
            draft.refuse(
                f"driver.{key}", value, f"not a field of OMB's {draft.system} driver; known: {', '.join(known)}"
            )
        elif key == "name":
            draft.note("driver.name", value, "recorded in the origin")
        elif key == "driverClass":
            draft.note("driver.driverClass", value, f"system {draft.system}")


def _matrix_mapping(w: dict[str, Any], draft: Draft, options: ImportOptions) -> dict[str, Any]:
    name = options.name or _slug(str(w["name"] or draft.workload_source.rsplit("/", 1)[-1].rsplit(".", 1)[0]))
    described = f"OMB workload {w['name']!r}" if w["name"] else "an OMB workload"
    origin = {
        "tool": "openmessaging-benchmark",
        "workload_file": draft.workload_source,
        "workload_name": w["name"],
        "driver_file": draft.driver_source,
        "mapping": [m.to_dict() for m in draft.mapped],
        "warnings": list(draft.warnings),
    }
    system = {
        "system": draft.system,
        "versions": [options.version],
        "broker": draft.broker,
        "client": draft.client,
        "background": draft.background,
    }
    return {
        "name": name,
        "description": f"{described} imported from {draft.workload_source}"
        + (f" with driver {draft.driver_source}" if draft.driver_source else ""),
        "origin": origin,
        "systems": [{k: v for k, v in system.items() if v or k == "versions"}],
        "workload": draft.workload,
        "measurements": [draft.measurement],
        **({"capacity": draft.capacity} if draft.capacity else {}),
    }


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return "omb_" + (slug or "workload")


def matrix_yaml(imported: Imported) -> str:
    """The matrix file: a header naming its origin and every warning, then the matrix (origin last)."""
    header = [
        f"# Imported by `sixnines import omb` — {imported.raw['description']}.",
        "# `origin:` records what every OMB field became; it is kept with each cell's result (docs/interop.md).",
        *(f"# WARNING {w}" for w in imported.warnings),
    ]
    if "capacity" in imported.raw:
        header.insert(
            2, "# producerRate: 0 (OMB's max-rate mode) is the `capacity:` search; `sixnines capacity` runs it."
        )
    body = {k: v for k, v in imported.raw.items() if k != "origin"}
    text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110)
    origin = yaml.safe_dump({"origin": imported.raw["origin"]}, sort_keys=False, allow_unicode=True, width=110)
    return "\n".join(header) + "\n" + text + origin
