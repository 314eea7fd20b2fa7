"""Every workload OMB ships (fixed-rate and max-rate), with a driver file of each system, and every driver file OMB
ships: each imports into a matrix that parses back to the same cells, or is refused for exactly the reasons the
mapping gives (a RabbitMQ topic of several partitions, which OMB's RabbitMQ driver refuses itself; a backlog
outside Kafka). Several topics import as one measured topic and the others as background, whose load adds up to
OMB's. The files are OMB's own, copied into tests/data/omb (its README)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_tasks.errors import InteropError
from bench_tasks.interop.omb_workload import Imported, import_omb, matrix_yaml
from bench_tasks.spec.matrix import parse_matrix

OMB = Path(__file__).parents[1] / "data" / "omb"
WORKLOADS = sorted(p.name for p in (OMB / "workloads").glob("*.yaml"))
DRIVERS = sorted(str(p.relative_to(OMB / "drivers")) for p in (OMB / "drivers").rglob("*.yaml"))
# One driver file per system: every workload is imported with each.
SYSTEM_DRIVERS = {
    "kafka": "driver-kafka/kafka-latency.yaml",
    "rabbitmq": "driver-rabbitmq/rabbitmq.yaml",
    "redis": "driver-redis/redis.yaml",
    "nats": "driver-nats/nats.yaml",
    "stan": "driver-nats-streaming/nats-streaming.yaml",
}
# Of OMB's 130 workloads (125 fixed-rate, 5 max-rate), how many import onto each system. Kafka: all. NATS, NATS
# Streaming, Redis: all but the 3 with a backlog (a prefill with lagging consumers is Kafka's). RabbitMQ: the 72
# whose topics have one partition and no backlog, 66 of them of several topics (OMB's RabbitMQ driver refuses
# partitions; the 5 max-rate workloads all have several).
IMPORTED = {
    "kafka": {"fixed": 125, "max-rate": 5},
    "nats": {"fixed": 122, "max-rate": 5},
    "stan": {"fixed": 122, "max-rate": 5},
    "redis": {"fixed": 122, "max-rate": 5},
    "rabbitmq": {"fixed": 72, "max-rate": 0},
}
FIXED_RATE, MAX_RATE = "1-topic-1-partition-1kb.yaml", "max-rate-1-topic-16-partitions-1kb.yaml"
MANY_TOPICS = "100-topics-1-partitions-1kb.yaml"  # 100 topics, 3 subscriptions each


@cache
def omb_file(path: str) -> dict[str, Any]:
    return yaml.safe_load((OMB / path).read_text())


def refused_fields(workload: dict[str, Any], system: str) -> set[str]:
    """The workload fields an import onto `system` refuses, by the mapping's rules (docs/interop.md)."""
    refused = set()
    if system == "rabbitmq" and workload["partitionsPerTopic"] > 1:
        refused.add("partitionsPerTopic")
    if system != "kafka" and workload.get("consumerBacklogSizeGB", 0) > 0:
        refused.add("consumerBacklogSizeGB")
    return refused


def import_shipped(workload_name: str, driver_path: str) -> Imported:
    source = f"workloads/{workload_name}"
    return import_omb(omb_file(source), source, omb_file(f"drivers/{driver_path}"), driver_path)


def check_written_matrix(imported: Imported, workload: dict[str, Any], system: str) -> None:
    """The matrix file as `import omb` writes it parses back to the same cells, and is a capacity search exactly
    when OMB's workload asks for its max-rate mode."""
    again = parse_matrix(yaml.safe_load(matrix_yaml(imported)), "imported.yaml")
    assert [c.id for c in again.cells] == [c.id for c in imported.matrix.cells]
    assert {c.spec.system for c in again.cells} == {system}
    searched = workload["producerRate"] == 0
    assert (again.capacity is not None) == searched
    topics = workload["topics"]
    (cell,) = again.cells
    if searched:
        assert again.capacity is not None and again.capacity.objectives == ["backlog p99 < 1000 msgs"]
        assert cell.spec.workload.rate_per_s == pytest.approx(10_000 / topics)
        assert again.capacity.max_rate_per_s == pytest.approx(10_000_000 / topics)
    check_other_topics(cell.spec, workload, system)


def check_other_topics(spec: Any, workload: dict[str, Any], system: str) -> None:
    """One topic measured; the others' producers, rate and (Kafka) partitions are the background's, and the two
    together are OMB's whole load."""
    topics, producers = workload["topics"], workload["producersPerTopic"]
    if topics == 1:
        assert not spec.background
        return
    bg = spec.background["other_topics"]
    assert bg.producers == (topics - 1) * producers and bg.processes == min(bg.producers, 4)
    assert bg.message_size_bytes == spec.workload.message_size_bytes == workload["messageSize"]
    assert bg.rate_per_producer_per_s == pytest.approx(spec.workload.rate_per_s / producers)
    if workload["producerRate"]:
        assert spec.workload.rate_per_s + bg.rate_per_s == pytest.approx(workload["producerRate"])
    assert bg.follows_rate == (workload["producerRate"] == 0)
    subscriptions = workload["subscriptionsPerTopic"]
    readers = (topics - 1) * workload["consumerPerSubscription"] if subscriptions else 0
    assert bg.subscriptions == (subscriptions if system == "kafka" and subscriptions > 1 else 1)
    assert bg.consumers == min(readers, max(1, 4 // bg.subscriptions))  # 4 reader processes at most
    partitions = (topics - 1) * workload["partitionsPerTopic"] if system == "kafka" else 1
    assert bg.partitions == min(partitions, 10_000)


@pytest.mark.parametrize("system", SYSTEM_DRIVERS)
def test_every_shipped_workload_imports_or_is_refused_for_its_reasons(system: str) -> None:
    imported = {"fixed": 0, "max-rate": 0}
    for name in WORKLOADS:
        workload = omb_file(f"workloads/{name}")
        expected = refused_fields(workload, system)
        try:
            result = import_shipped(name, SYSTEM_DRIVERS[system])
        except InteropError as exc:
            fields = {p.removeprefix(f"workloads/{name}: ").split(": ")[0] for p in exc.problems}
            assert fields == expected, (name, exc.problems)
            continue
        assert not expected, (name, "imported, though", expected)
        check_written_matrix(result, workload, system)
        imported["max-rate" if workload["producerRate"] == 0 else "fixed"] += 1
    assert imported == IMPORTED[system]


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_shipped_driver_file_imports_fixed_rate_max_rate_and_many_topics(driver: str) -> None:
    for name in (FIXED_RATE, MAX_RATE, MANY_TOPICS):
        workload = omb_file(f"workloads/{name}")
        system = next(s for s, d in SYSTEM_DRIVERS.items() if d.split("/")[0] == driver.split("/")[0])
        if refused_fields(workload, system):
            with pytest.raises(InteropError):
                import_shipped(name, driver)
            continue
        check_written_matrix(import_shipped(name, driver), workload, system)


def test_the_shipped_files_are_all_here() -> None:
    """The copy is whole: OMB's workloads folder and the top of each of the five systems' driver folders."""
    assert len(WORKLOADS) == 130 and sum(omb_file(f"workloads/{n}")["producerRate"] == 0 for n in WORKLOADS) == 5
    assert len(DRIVERS) == 18 and {d.split("/")[0] for d in DRIVERS} == {
        d.split("/")[0] for d in SYSTEM_DRIVERS.values()
    }


@pytest.mark.parametrize("driver", [d for d in DRIVERS if d.startswith("driver-kafka/")])
def test_librdkafka_accepts_the_client_config_of_every_shipped_kafka_driver_file(driver: str) -> None:
    """What an imported Kafka cell hands to librdkafka, as a client of it (no broker needed): a name or a value
    librdkafka refuses would fail every cell of the matrix when its first producer or consumer starts."""
    import confluent_kafka

    (cell,) = import_shipped(MANY_TOPICS, driver).matrix.cells
    client = cell.spec.client
    base = {"bootstrap.servers": "127.0.0.1:9", "error_cb": lambda _: None}
    for config in (client.producer, cell.spec.background["other_topics"].producer):
        confluent_kafka.Producer({**base, **config}).flush(0)
    confluent_kafka.Consumer({**base, "group.id": "sixnines-omb-test", **client.consumer}).close()
