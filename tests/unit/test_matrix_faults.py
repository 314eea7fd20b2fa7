"""`faults:` in a matrix: where it may stand (top level, a system block, an axis), what is refused (each problem
naming its field), how a fault changes the cell's id and label, and how a fault's target is resolved."""

from __future__ import annotations

import random
from typing import Any

import pytest

from bench_tasks.cell.faults import resolve_target
from bench_tasks.errors import CellError
from tests.unit.matrices import one_system, parse, problems

STALL = {"at_s": 1, "action": "stall", "target": "leader", "duration_s": 1}


def raw(**extra: Any) -> dict[str, Any]:
    return one_system("nats", {"mode": "jetstream", "servers": 3}, versions=("2.15.1",), **extra)


def test_a_fault_is_part_of_the_cell_its_id_and_label() -> None:
    (plain,) = parse(raw()).cells
    (faulted,) = parse(raw(faults=[STALL])).cells
    assert faulted.id != plain.id and faulted.series_key != plain.series_key
    assert "faults" not in plain.spec.model_dump(mode="json")  # cells without faults keep their ids
    assert faulted.spec.faults[0].duration_s == 1
    assert faulted.label.endswith(" fault:stall@1s/leader 1s")


def test_a_system_block_s_faults_replace_the_top_level_ones() -> None:
    data = raw(faults=[STALL])
    data["systems"][0]["faults"] = [{"at_s": 2, "action": "kill", "target": "node:2"}]
    (cell,) = parse(data).cells
    assert [(f.action, f.target) for f in cell.spec.faults] == [("kill", "node:2")]


def test_faults_as_an_axis_give_one_cell_per_value() -> None:
    data = raw(axes={"faults": [[], [STALL], [{"at_s": 1, "action": "kill", "target": "random"}]]})
    cells = parse(data).cells
    assert [[f.action for f in c.spec.faults] for c in cells] == [[], ["stall"], ["kill"]]
    assert len({c.id for c in cells}) == 3


@pytest.mark.parametrize(
    ("fault", "field", "words"),
    [
        ({"at_s": 1, "action": "stall"}, "faults[0]: duration_s", "required for action 'stall'"),
        ({"at_s": 1, "action": "kill", "duration_s": 1}, "faults[0]: duration_s", "only for actions stall, partition"),
        ({"at_s": 1, "action": "kill", "target": "broker"}, "faults[0]: target 'broker'", "expected 'leader'"),
        ({"at_s": 1, "action": "pause"}, "faults[0].action", "not allowed"),
        ({"at_s": 1, "action": "kill", "when": 2}, "faults[0].when", "unknown key"),
        ({"at_s": 1, "action": "restart", "duration_s": 1}, "faults[0]: duration_s", "a restart has no duration"),
        ({"at_s": 3, "action": "kill"}, "faults[0].at_s: 3", "beyond the measure phase"),
        ({**STALL, "duration_s": 2.5}, "faults[0].duration_s: 2.5", "outlast the measure phase"),
        ({"at_s": 1, "action": "kill", "target": "node:4"}, "faults[0].target: 'node:4'", "node:1, node:2, node:3"),
    ],
)
def test_refusals_name_the_field(fault: dict[str, Any], field: str, words: str) -> None:
    found = problems(raw(faults=[fault]))
    assert any(p.startswith(field) and words in p for p in found), found


def test_an_action_the_system_does_not_declare_is_refused() -> None:
    data = raw(faults=[{"at_s": 1, "action": "restart", "target": "node:1"}])
    data["systems"][0] = {"system": "rabbitmq", "versions": ["latest"], "broker": {"nodes": 3}}
    (problem,) = problems(data)
    assert problem.startswith("faults[0].action: 'restart' — rabbitmq supports: stall, kill (a restart starts")
    data["systems"][0] = {"system": "nats", "versions": ["latest"], "broker": {"mode": "core"}}
    (cell,) = parse(data | {"faults": [{"at_s": 1, "action": "restart", "target": "node:0"}]}).cells
    assert cell.label.endswith("fault:restart@1s/node:0")


def test_a_block_s_fault_problem_is_named_in_the_block() -> None:
    data = raw()
    data["systems"][0]["faults"] = [{"at_s": 1, "action": "kill", "target": "node:0"}]
    assert problems(data) == ["systems[0].faults[0].target: 'node:0' — this cell's nodes are node:1, node:2, node:3"]


def test_an_axis_value_s_fault_problem_names_the_axis() -> None:
    found = problems(raw(axes={"faults": [[], [{"at_s": 9, "action": "kill"}]]}))
    assert any(p.startswith("axes.faults[1]:") and "faults[0].at_s: 9" in p for p in found), found


def test_a_fault_while_a_stall_holds_its_node_is_refused() -> None:
    found = problems(raw(faults=[STALL, {"at_s": 1.5, "action": "kill"}]))
    assert any("faults[1].at_s: 1.5 — fires while an earlier fault" in p for p in found), found


def test_external_brokers_cannot_be_faulted() -> None:
    data = raw(faults=[STALL])
    data["systems"][0] = {"system": "nats", "brokers": "external", "connection": "c"}
    assert any("faults signal the brokers a cell provisions" in p for p in problems(data))


def test_a_single_nats_server_is_node_0() -> None:
    data = raw(faults=[{"at_s": 1, "action": "kill", "target": "node:0"}])
    data["systems"][0]["broker"] = {"mode": "core"}
    (cell,) = parse(data).cells
    assert cell.spec.faults[0].node == 0


def test_targets_resolve_to_a_node() -> None:
    asked: list[str] = []

    def leader() -> int:
        asked.append("leader")
        return 2

    rng = random.Random(7)
    assert resolve_target("node:3", [1, 2, 3], leader, rng) == 3
    assert not asked  # a node target never waits on a leader poll
    assert resolve_target("leader", [1, 2, 3], leader, rng) == 2 and asked == ["leader"]
    with pytest.raises(CellError, match="no such node"):
        resolve_target("node:9", [1, 2, 3], leader, rng)


def test_random_targets_follow_the_seed() -> None:
    def draws(seed: int) -> list[int]:
        rng = random.Random(seed)
        return [resolve_target("random", [3, 1, 2], lambda: 0, rng) for _ in range(8)]

    assert draws(1) == draws(1)
    assert set(draws(1)) <= {1, 2, 3}
    assert draws(1) != draws(2)


def test_redis_nodes_are_its_primary_and_replicas_and_nats_streaming_its_one_server() -> None:
    data = raw(faults=[{"at_s": 1, "action": "kill", "target": "node:3"}])
    data["systems"][0] = {"system": "redis", "versions": ["latest"], "broker": {"mode": "streams", "replicas": 2}}
    (cell,) = parse(data).cells
    assert cell.spec.faults[0].node == 3
    data["systems"][0]["broker"]["replicas"] = 1
    assert problems(data) == ["faults[0].target: 'node:3' — this cell's nodes are node:1, node:2"]
    data["systems"][0] = {"system": "stan", "versions": ["latest"], "broker": {"store": "file"}}
    assert problems(data) == ["faults[0].target: 'node:3' — this cell's nodes are node:0"]
    (cell,) = parse(data | {"faults": [{"at_s": 1, "action": "restart", "target": "leader"}]}).cells
    assert cell.label.endswith("fault:restart@1s/leader")


def test_a_follower_target_never_hits_the_leader_and_follows_the_seed() -> None:
    def draws(seed: int) -> list[int]:
        rng = random.Random(seed)
        return [resolve_target("follower", [1, 2, 3], lambda: 2, rng) for _ in range(8)]

    assert set(draws(4)) == {1, 3} and draws(4) == draws(4)
    with pytest.raises(CellError, match="node 1 leads and there is no other node"):
        resolve_target("follower", [1], lambda: 1, random.Random(0))


def test_a_follower_of_a_single_node_is_refused_and_stan_has_none() -> None:
    data = raw(faults=[{"at_s": 1, "action": "stall", "target": "follower", "duration_s": 1}])
    (cell,) = parse(data).cells
    assert cell.label.endswith("fault:stall@1s/follower 1s")
    data["systems"][0]["broker"] = {"mode": "core"}
    assert problems(data) == ["faults[0].target: 'follower' — this cell has one node (node:0), which leads everything"]
    data["systems"][0] = {"system": "stan", "versions": ["latest"], "broker": {"store": "file"}}
    assert problems(data)[0].startswith("faults[0].target: 'follower' — stan supports: leader, node:N, random")


def test_a_controller_target_asks_the_metadata_leader_and_only_kafka_and_nats_have_one() -> None:
    assert resolve_target("controller", [1, 2, 3], lambda: 1, random.Random(0), controller=lambda: 3) == 3
    with pytest.raises(CellError, match="cannot say which node leads their metadata"):
        resolve_target("controller", [1, 2, 3], lambda: 1, random.Random(0))
    data = raw(faults=[{"at_s": 1, "action": "kill", "target": "controller"}])
    (cell,) = parse(data).cells
    assert cell.label.endswith("fault:kill@1s/controller")
    data["systems"][0] = {"system": "redis", "versions": ["latest"], "broker": {"mode": "streams", "replicas": 2}}
    assert problems(data) == ["faults[0].target: 'controller' — redis supports: leader, follower, node:N, random"]


def chain(system: str, broker: dict[str, Any], fault: dict[str, Any], relays: int = 1) -> dict[str, Any]:
    data = one_system(system, broker, workload={"relays": relays}, faults=[fault])
    return data | {"measurements": ["chain"]}


def test_a_relay_is_a_fault_target_for_any_system_in_a_chain() -> None:
    """A worker is the harness's own process: chronicle declares no broker faults, yet its relay may be hit."""
    stall = {"at_s": 1, "action": "stall", "target": "worker:relay-0", "duration_s": 0.5}
    (cell,) = parse(chain("chronicle", {}, stall)).cells
    assert cell.spec.faults[0].worker == ("relay", 0)
    assert cell.label.endswith("fault:stall@1s/worker:relay-0 0.5s")
    (cell,) = parse(chain("nats", {"mode": "core"}, stall | {"target": "worker:relay-1"}, relays=2)).cells
    assert cell.spec.faults[0].worker == ("relay", 1)


@pytest.mark.parametrize(
    ("fault", "measurement", "expected"),
    [
        ({"action": "restart"}, "chain", "faults[0].action: 'restart' — a worker can be stalled or killed"),
        ({"target": "worker:relay-1"}, "chain", "faults[0].target: 'worker:relay-1' — this cell has relays relay-0"),
        ({}, "e2e", "faults[0].target: 'worker:relay-0' — this cell has no relay (not a chain)"),
    ],
)
def test_worker_fault_refusals_name_the_field(fault: dict[str, Any], measurement: str, expected: str) -> None:
    data = chain("chronicle", {}, {"at_s": 1, "action": "kill", "target": "worker:relay-0", **fault})
    assert problems(data | {"measurements": [measurement]}) == [expected]


def test_only_relays_are_worker_targets() -> None:
    data = chain("chronicle", {}, {"at_s": 1, "action": "kill", "target": "worker:producer-0"})
    (problem,) = problems(data)
    assert "target 'worker:producer-0'" in problem and "'worker:relay-N'" in problem
