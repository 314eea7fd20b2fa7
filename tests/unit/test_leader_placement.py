"""`broker.leader: node:N` in a matrix: what is refused at validation (each problem naming the field), what an
axis of it gives (one cell per node, its own id and label), and Kafka's replica assignment that places it."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.systems.kafka.placement import leader_assignment
from tests.unit.matrices import one_system, parse, problems

KAFKA3 = {"brokers": 3, "partitions": 1, "replication_factor": 3}
NATS_R3 = {"mode": "jetstream", "servers": 3, "replicas": 3}


def raw(system: str, broker: dict[str, Any], **block: Any) -> dict[str, Any]:
    return one_system(system, broker, workload={"measure_s": 2}, block=block)


@pytest.mark.parametrize(
    ("system", "broker", "expected"),
    [
        ("redis", {"leader": "node:1"}, "systems[0].broker.leader: 'node:1' — redis cannot place a leader"),
        ("rabbitmq", {"leader": "node:1"}, "systems[0].broker.leader: 'node:1' — rabbitmq cannot place a leader"),
        ("kafka", {**KAFKA3, "leader": "node:4"}, "systems[0].broker.leader: 'node:4' — this cell's nodes are node:1"),
        ("kafka", {"leader": "node:2"}, "systems[0].broker.leader: 'node:2' — this cell's nodes are node:1"),
        ("kafka", {**KAFKA3, "leader": "leader"}, "systems[0].broker.leader: 'leader' — String should match"),
        ("nats", {**NATS_R3, "leader": "node:0"}, "systems[0].broker.leader: 'node:0' — this cell's nodes are node:1"),
        ("nats", {**NATS_R3, "replicas": 1, "leader": "node:1"}, "only for a JetStream R3 stream on 3 servers"),
        ("nats", {"mode": "jetstream", "leader": "node:0"}, "(is servers 1, replicas 1)"),
    ],
)
def test_a_leader_the_cell_cannot_place_is_refused_naming_the_field(
    system: str, broker: dict[str, Any], expected: str
) -> None:
    (problem,) = problems(raw(system, broker))
    assert expected in problem


def test_external_brokers_take_no_leader() -> None:
    data = raw("kafka", {**KAFKA3, "leader": "node:1"}, brokers="external", connection="prod")
    data["systems"][0].pop("versions")
    (problem,) = problems(data)
    assert problem.startswith("systems[0].broker.leader: 'node:1' — external brokers are not placed")


def test_an_axis_of_leaders_gives_one_cell_per_node_and_no_leader_keeps_the_old_id() -> None:
    axis = {"broker.leader": ["node:1", "node:2", "node:3"]}
    cells = parse(raw("kafka", KAFKA3, axes=axis)).cells
    (plain,) = parse(raw("kafka", KAFKA3)).cells
    assert [c.spec.broker.leader for c in cells] == ["node:1", "node:2", "node:3"]
    assert len({c.id for c in cells} | {plain.id}) == 4
    assert cells[2].label.startswith("kafka b3 p1 rf3 acks=all leader=node:3 ")
    assert "leader" not in plain.spec.model_dump(mode="json")["broker"]  # cells without one keep their ids
    (nats,) = parse(raw("nats", {**NATS_R3, "leader": "node:2"})).cells
    assert nats.spec.broker.leader == "node:2"


def test_an_axis_value_the_cell_has_not_is_refused() -> None:
    (problem,) = problems(raw("kafka", KAFKA3, axes={"broker.leader": ["node:1", "node:5"]}))
    assert "broker.leader: 'node:5' — this cell's nodes are node:1, node:2, node:3" in problem


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "leader", "expected"),
    [
        (3, 1, 3, 3, [[3, 1, 2]]),
        (3, 1, 1, 2, [[2]]),
        (3, 2, 2, 1, [[1, 2], [1, 2]]),
        (1, 1, 1, 1, [[1]]),
    ],
)
def test_kafka_puts_the_leader_first_in_every_partition_s_replicas(
    brokers: int, partitions: int, rf: int, leader: int, expected: list[list[int]]
) -> None:
    assert leader_assignment(brokers, partitions, rf, leader) == expected


def test_a_placed_leader_that_moved_before_the_measure_phase_fails_the_cell_naming_who_led() -> None:
    from types import SimpleNamespace

    from bench_tasks.cell.landing import _placed_leader_moved

    (placed,) = parse(raw("kafka", {**KAFKA3, "leader": "node:3"})).cells
    (unplaced,) = parse(raw("kafka", KAFKA3)).cells
    run: Any = SimpleNamespace(plan=SimpleNamespace(measure_start_ns=100))
    held = [{"at_ns": 10, "partition": 0, "leader": 3}]
    moved = [*held, {"at_ns": 50, "partition": 0, "leader": 1}, {"at_ns": 150, "partition": 0, "leader": 3}]
    assert _placed_leader_moved(placed, run, held) is None
    assert _placed_leader_moved(placed, run, moved) == (
        "broker.leader node:3: partition 0 was led by node 1 when the measure phase started"
    )
    assert "led by no known node" in (_placed_leader_moved(placed, run, []) or "")
    assert _placed_leader_moved(unplaced, run, moved) is None
