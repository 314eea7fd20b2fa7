"""OpenMessaging Benchmark workload (and driver) files → a sixnines matrix.

OMB describes one test as a workload file (`messageSize`, `producerRate`, `topics`, …, the fields of its
`Workload` class) plus a driver file per system (Kafka: `replicationFactor`, `topicConfig`,
`producerConfig`, …; NATS: `replicationFactor`, `storageType`, …). `import_omb` maps each field onto the
matrix, records the mapping of every field it read (the matrix's `origin:`, which travels with each cell
into its result.json), warns about every field it cannot carry and refuses what sixnines cannot measure
faithfully (several topics or subscriptions, OMB's max-rate search) with the reason and the numbers.

Pure: it takes already-parsed mappings and returns the matrix; reading files is the CLI's job.
docs/interop.md has the mapping table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import InteropError, MatrixError
from ..payload import HEADER_SIZE
from ..spec.matrix import Matrix, parse_matrix
from .kafka_props import Role, parse_properties, translate

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
DRIVER_CLASSES = {
    "io.openmessaging.benchmark.driver.kafka.KafkaBenchmarkDriver": "kafka",
    "io.openmessaging.benchmark.driver.nats.NatsBenchmarkDriver": "nats",
}
DRIVER_FIELDS = {
    "kafka": (
        "name",
        "driverClass",
        "replicationFactor",
        "topicConfig",
        "commonConfig",
        "producerConfig",
        "consumerConfig",
    ),
    "nats": ("name", "driverClass", "natsHostUrl", "replicationFactor", "storageType", "maxBytes"),
}
KEY_DISTRIBUTORS = {"NO_KEY": "none", "KEY_ROUND_ROBIN": "round_robin", "RANDOM_NANO": "random"}
GIB = 1024**3
HIGH_RATE_PER_S = 1_000_000  # OMB's max-rate workloads ask for 10 M msg/s: far past any open-loop generator


@dataclass(frozen=True)
class ImportOptions:
    """What an OMB file does not say, or what a user overrides (each override is recorded in the mapping)."""

    system: str = "kafka"  # used when no driver file says it
    version: str = "latest"
    name: str | None = None
    warmup_s: float | None = None
    measure_s: float | None = None
    cooldown_s: float = 1.0


@dataclass(frozen=True)
class Mapped:
    """One OMB field and where it went: `sixnines` is the matrix path (None when it was not carried)."""

    omb: str
    value: Any
    sixnines: str | None
    sixnines_value: Any = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "omb": self.omb,
            "value": self.value,
            "sixnines": self.sixnines,
            "sixnines_value": self.sixnines_value,
            "note": self.note,
        }


@dataclass
class Draft:
    """The matrix being built, and the account of every field read."""

    workload_source: str
    driver_source: str | None
    system: str
    workload: dict[str, Any] = field(default_factory=dict)
    broker: dict[str, Any] = field(default_factory=dict)
    client: dict[str, Any] = field(default_factory=dict)
    measurement: str = "e2e"
    mapped: list[Mapped] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def put(self, omb: str, value: Any, path: str, new: Any, note: str = "") -> None:
        """Set matrix `path` (`workload.x`, `broker.y`, `client.producer.linger.ms`) and record why."""
        section, _, rest = path.partition(".")
        target = getattr(self, section)
        for part in _split(rest)[:-1]:
            target = target.setdefault(part, {})
        target[_split(rest)[-1]] = new
        self.mapped.append(Mapped(omb, value, path, new, note))

    def note(self, omb: str, value: Any, note: str) -> None:
        """A field read and understood that sets nothing (its meaning is the harness's default)."""
        self.mapped.append(Mapped(omb, value, None, None, note))

    def warn(self, omb: str, value: Any, note: str) -> None:
        """A field that cannot be carried: recorded, and shown to the user."""
        self.mapped.append(Mapped(omb, value, None, None, f"NOT CARRIED: {note}"))
        self.warnings.append(f"{self._where(omb)}: {value!r} — {note}")

    def refuse(self, omb: str, value: Any, reason: str) -> None:
        self.problems.append(f"{self._where(omb)}: {value!r} — {reason}")

    def _where(self, omb: str) -> str:
        """The file and the field, as the user wrote them."""
        if omb.startswith("driver."):
            return f"{self.driver_source}: {omb.removeprefix('driver.')}"
        return f"{self.workload_source}: {omb}"


def _split(path: str) -> list[str]:
    """`producer.linger.ms` → ["producer", "linger.ms"]: client option names keep their dots."""
    head, _, tail = path.partition(".")
    return [head, tail] if head in ("producer", "consumer", "topic", "server") and tail else path.split(".")


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
    system = _system(driver, driver_source, options, workload_source)
    draft = Draft(workload_source, driver_source, system)
    fields = _workload_fields(workload, draft)
    typed = not any(" — must be " in p for p in draft.problems)  # unknown keys are listed with the rest
    if typed:
        _map_workload(fields, draft, options)
    if driver is not None and typed:
        (_map_kafka_driver if system == "kafka" else _map_nats_driver)(driver, draft)
    if draft.problems:
        raise InteropError(workload_source, draft.problems)
    if driver is None:
        _no_driver_defaults(draft)
    raw = _matrix_mapping(fields, draft, options)
    try:
        matrix = parse_matrix(raw, workload_source)
    except MatrixError as exc:
        raise InteropError(workload_source, [f"the imported matrix is not valid: {p}" for p in exc.problems]) from None
    return Imported(raw, matrix, draft.mapped, draft.warnings)


def _system(driver: Mapping[str, Any] | None, source: str | None, options: ImportOptions, workload_source: str) -> str:
    if driver is None:
        if options.system not in DRIVER_FIELDS:
            raise InteropError(
                workload_source, [f"system {options.system!r}: sixnines runs {', '.join(DRIVER_FIELDS)}"]
            )
        return options.system
    driver_class = driver.get("driverClass")
    if driver_class not in DRIVER_CLASSES:
        known = ", ".join(f"{c} ({s})" for c, s in DRIVER_CLASSES.items())
        raise InteropError(str(source), [f"driverClass: {driver_class!r} — no sixnines system for it; known: {known}"])
    return DRIVER_CLASSES[driver_class]


def _workload_fields(workload: Mapping[str, Any], draft: Draft) -> dict[str, Any]:
    """OMB's defaults overlaid with the file; unknown keys refused (OMB's own reader refuses them too)."""
    for key, value in workload.items():
        if key in WORKLOAD_DEFAULTS and (problem := _type_problem(WORKLOAD_DEFAULTS[key], value)) is not None:
            draft.refuse(key, value, problem)
    if draft.problems:
        return dict(WORKLOAD_DEFAULTS)
    for key, value in workload.items():
        if key not in WORKLOAD_DEFAULTS:
            draft.refuse(key, value, f"not a field of OMB's Workload; known: {', '.join(WORKLOAD_DEFAULTS)}")
    return {**WORKLOAD_DEFAULTS, **{k: v for k, v in workload.items() if k in WORKLOAD_DEFAULTS}}


def _type_problem(default: Any, value: Any) -> str | None:
    """What is wrong with a value of the type OMB's Java field has (None when it fits)."""
    if default is None or isinstance(default, str):
        return None if value is None or isinstance(value, str) else "must be text"
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(default, int):
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be a whole number"
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if ok else "must be a number"


def _map_workload(w: dict[str, Any], draft: Draft, options: ImportOptions) -> None:
    _map_topics(w, draft)
    _map_sizes_and_keys(w, draft)
    _map_clients(w, draft)
    _map_rate(w, draft)
    _map_durations(w, draft, options)
    _map_payload(w, draft)
    _map_backlog(w, draft)


def _map_topics(w: dict[str, Any], draft: Draft) -> None:
    topics, partitions = w["topics"], w["partitionsPerTopic"]
    if topics < 1:
        draft.refuse("topics", topics, "a workload needs at least 1 topic")
    elif topics > 1:
        per_topic = w["producerRate"] / topics if w["producerRate"] else 0
        draft.refuse(
            "topics",
            topics,
            "sixnines measures one topic per cell (its schedule, consumers and message accounting are per "
            "topic); several measured topics in one cell are not supported. Import it with topics: 1 "
            f"(OMB's rate per topic here is {per_topic:g} msg/s) or add the other topics as unmeasured "
            "`background:` workloads",
        )
    else:
        draft.note("topics", topics, "one topic (a Kafka topic, a NATS subject or stream) per cell")
    if partitions < 1:
        draft.refuse("partitionsPerTopic", partitions, "at least 1")
    elif draft.system == "kafka":
        draft.put("partitionsPerTopic", partitions, "broker.partitions", partitions)
    elif partitions == 1:
        draft.note("partitionsPerTopic", partitions, "a NATS stream is one ordered log")
    else:
        draft.warn("partitionsPerTopic", partitions, "NATS has no partitions (OMB's NATS driver ignores it too)")


def _map_sizes_and_keys(w: dict[str, Any], draft: Draft) -> None:
    size = w["messageSize"]
    if size < HEADER_SIZE:
        draft.refuse("messageSize", size, f"smaller than the {HEADER_SIZE}-byte header every sixnines message carries")
    else:
        draft.put("messageSize", size, "workload.message_size_bytes", size)
    key = w["keyDistributor"]
    if key not in KEY_DISTRIBUTORS:
        draft.refuse("keyDistributor", key, f"unknown; OMB's are {', '.join(KEY_DISTRIBUTORS)}")
    elif draft.system == "kafka":
        note = {
            "KEY_ROUND_ROBIN": "OMB cycles a fixed set of keys; sixnines round_robin spreads messages over the "
            "partitions in turn, the effect that key set has",
            "RANDOM_NANO": "a random key per message",
        }.get(key, "no key: librdkafka's sticky partitioner")
        draft.put("keyDistributor", key, "client.keys", KEY_DISTRIBUTORS[key], note)
    elif key == "NO_KEY":
        draft.note("keyDistributor", key, "NATS messages have no key")
    else:
        draft.warn("keyDistributor", key, "NATS messages have no key")


def _map_clients(w: dict[str, Any], draft: Draft) -> None:
    producers, subscriptions, consumers = (
        w["producersPerTopic"],
        w["subscriptionsPerTopic"],
        w["consumerPerSubscription"],
    )
    if producers < 1:
        draft.refuse("producersPerTopic", producers, "at least 1 producer")
    else:
        draft.put("producersPerTopic", producers, "workload.producers", producers)
    if subscriptions > 1:
        draft.refuse(
            "subscriptionsPerTopic",
            subscriptions,
            "sixnines measures one subscription (one consumer group, one NATS queue group) per cell; fan-out to "
            "several subscriptions is not supported",
        )
    elif subscriptions == 0:
        draft.measurement = "publish"
        draft.put("subscriptionsPerTopic", 0, "workload.consumers", 0, "no subscription: publish latency only")
        if consumers:
            draft.warn("consumerPerSubscription", consumers, "there is no subscription to put them in")
    elif consumers < 1:
        draft.refuse("consumerPerSubscription", consumers, "a subscription needs at least 1 consumer")
    else:
        draft.note("subscriptionsPerTopic", 1, "one consumer group (Kafka) or queue group (NATS)")
        draft.put("consumerPerSubscription", consumers, "workload.consumers", consumers)
    if draft.measurement == "publish" and draft.system == "nats":
        draft.note("subscriptionsPerTopic", 0, "JetStream publish acks are the measured latency")


def _map_rate(w: dict[str, Any], draft: Draft) -> None:
    rate = w["producerRate"]
    if rate <= 0:
        draft.refuse(
            "producerRate",
            rate,
            "OMB's max-rate mode (0) searches for the highest sustainable rate; sixnines measures at a fixed, "
            "open-loop rate and has no capacity search yet — set producerRate to the rate to measure",
        )
        return
    draft.put("producerRate", rate, "workload.rate_per_s", rate, "the total over all producers, as in OMB")
    if rate >= HIGH_RATE_PER_S:
        draft.warnings.append(
            f"producerRate: {rate} — an open-loop schedule this fast will outrun the generator on most hosts; "
            "the cell then fails its schedule-lag gate instead of reporting a number"
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


def _map_backlog(w: dict[str, Any], draft: Draft) -> None:
    gb, drain = w["consumerBacklogSizeGB"], w["backlogDrainRatio"]
    if gb <= 0:
        if drain != WORKLOAD_DEFAULTS["backlogDrainRatio"]:
            draft.note("backlogDrainRatio", drain, "applies only with consumerBacklogSizeGB > 0")
        return
    if draft.system != "kafka":
        draft.refuse("consumerBacklogSizeGB", gb, "a prefilled backlog with lagging consumers is a Kafka cell feature")
        return
    size = draft.workload.get("message_size_bytes") or HEADER_SIZE
    messages = math.ceil(gb * GIB / size)
    draft.put("consumerBacklogSizeGB", gb, "workload.prefill_messages", messages, f"{gb} GiB / messageSize")
    lagging = max(1, int(w["consumerPerSubscription"]))
    draft.put(
        "consumerBacklogSizeGB",
        gb,
        "workload.lagging_consumers",
        lagging,
        "OMB stops its consumers until the backlog is built and then lets the measured consumers drain it; "
        "here as many unmeasured consumers as the subscription has read the backlog from its oldest message "
        "while the measured ones read live messages, so the latency is the live stream's under backlog reads",
    )
    if drain != WORKLOAD_DEFAULTS["backlogDrainRatio"]:
        draft.warn("backlogDrainRatio", drain, "no equivalent: lagging consumers read for the whole cell")


def _map_kafka_driver(driver: Mapping[str, Any], draft: Draft) -> None:
    _driver_keys(driver, draft)
    rf = driver.get("replicationFactor", 1)
    if rf not in (1, 2, 3):
        draft.refuse("driver.replicationFactor", rf, "a provisioned Kafka cluster has 1 or 3 brokers: 1 to 3")
        return
    draft.put("driver.replicationFactor", rf, "broker.replication_factor", rf)
    draft.put("driver.replicationFactor", rf, "broker.brokers", 1 if rf == 1 else 3, "brokers to hold the replicas")
    for key, role in (("commonConfig", None), ("producerConfig", "producer"), ("consumerConfig", "consumer")):
        props = _properties(driver, key, draft)
        for name, value in props.items():
            _map_client_property(f"driver.{key}.{name}", name, value, role, draft)
    for name, value in _properties(driver, "topicConfig", draft).items():
        omb = f"driver.topicConfig.{name}"
        if name == "min.insync.replicas":
            draft.put(omb, value, "broker.min_insync_replicas", int(value), "modelled by the harness")
        else:
            draft.put(omb, value, f"broker.topic.{name}", value, "topic config, verbatim")


def _map_client_property(omb: str, name: str, value: Any, role: Role | None, draft: Draft) -> None:
    """commonConfig applies to producers and consumers both; security settings are the client's own axes."""
    if name == "security.protocol":
        draft.put(omb, value, "client.security", str(value).lower())
        return
    if name == "sasl.mechanism":
        draft.put(omb, value, "client.sasl_mechanism", str(value).upper())
        return
    roles: tuple[Role, ...] = (role,) if role else ("producer", "consumer")
    try:
        translated = [(r, translate(name, value, r)) for r in roles]
    except ValueError as exc:
        draft.refuse(omb, value, str(exc))
        return
    if all(t.target is None for _, t in translated):  # one warning, not one per role
        draft.warn(omb, value, translated[0][1].note)
        return
    for r, t in translated:
        if t.target is None:
            draft.warn(omb, value, f"{r}s: {t.note}")
            continue
        draft.put(omb, value, f"client.{r}.{t.target}", t.value, t.note)
        if t.warning:
            draft.warnings.append(f"{draft._where(omb)}: {value!r} — {t.note}")


def _properties(driver: Mapping[str, Any], key: str, draft: Draft) -> dict[str, Any]:
    text = driver.get(key)
    if not text:
        return {}
    try:
        return parse_properties(str(text))
    except ValueError as exc:
        draft.refuse(f"driver.{key}", "…", str(exc))
        return {}


def _driver_keys(driver: Mapping[str, Any], draft: Draft) -> None:
    known = DRIVER_FIELDS[draft.system]
    for key, value in driver.items():
        if key not in known:
            draft.refuse(
                f"driver.{key}", value, f"not a field of OMB's {draft.system} driver; known: {', '.join(known)}"
            )
        elif key == "name":
            draft.note("driver.name", value, "recorded in the origin")
        elif key == "driverClass":
            draft.note("driver.driverClass", value, f"system {draft.system}")


def _map_nats_driver(driver: Mapping[str, Any], draft: Draft) -> None:
    """OMB's NATS driver is JetStream: async publish with acks, a stream per topic (File storage by default)."""
    _driver_keys(driver, draft)
    draft.put(
        "driver.driverClass", driver["driverClass"], "broker.mode", "jetstream", "OMB's NATS driver uses JetStream"
    )
    if "natsHostUrl" in driver:
        draft.note(
            "driver.natsHostUrl",
            driver["natsHostUrl"],
            "the harness provisions nats-server (external: `brokers: external`)",
        )
    storage = str(driver.get("storageType", "File"))
    if storage.lower() not in ("file", "memory"):
        draft.refuse("driver.storageType", storage, "File or Memory")
    else:
        draft.put("driver.storageType", storage, "broker.storage", storage.lower(), "OMB's default is File")
    replicas = driver.get("replicationFactor", 1)
    if replicas not in (1, 3):
        draft.refuse("driver.replicationFactor", replicas, "sixnines runs R1 (one server) or R3 (a 3-node cluster)")
    else:
        draft.put("driver.replicationFactor", replicas, "broker.replicas", replicas)
        draft.put("driver.replicationFactor", replicas, "broker.servers", replicas, "servers to hold the replicas")
    max_bytes = driver.get("maxBytes", -1)
    if max_bytes not in (-1, None):
        draft.warn("driver.maxBytes", max_bytes, "no equivalent: sixnines streams are unlimited for a cell's length")


def _no_driver_defaults(draft: Draft) -> None:
    """Without a driver file the system's settings are sixnines' defaults; NATS is JetStream, as OMB's driver."""
    if draft.system == "nats":
        draft.put("(no driver file)", None, "broker.mode", "jetstream", "OMB's NATS driver uses JetStream")
    else:
        draft.note("(no driver file)", None, "Kafka defaults: 1 broker, replication factor 1, librdkafka defaults")


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
    system = {"system": draft.system, "versions": [options.version], "broker": draft.broker, "client": draft.client}
    return {
        "name": name,
        "description": f"{described} imported from {draft.workload_source}"
        + (f" with driver {draft.driver_source}" if draft.driver_source else ""),
        "origin": origin,
        "systems": [{k: v for k, v in system.items() if v or k == "versions"}],
        "workload": draft.workload,
        "measurements": [draft.measurement],
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
    body = {k: v for k, v in imported.raw.items() if k != "origin"}
    text = yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=110)
    origin = yaml.safe_dump({"origin": imported.raw["origin"]}, sort_keys=False, allow_unicode=True, width=110)
    return "\n".join(header) + "\n" + text + origin
