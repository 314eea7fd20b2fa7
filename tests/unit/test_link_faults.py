"""`partition` and `bandwidth` faults and one broker host per node: what a matrix may ask (each refusal naming its
field), what a cell with them is (its id, label, node sites), and that faults without them keep their ids."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.topology import netns
from bench_tasks.topology.plan import resolve_placement
from tests.unit.matrices import one_system, parse, problems

PARTITION = {"at_s": 1, "action": "partition", "target": "leader", "duration_s": 1}
SQUEEZE = {"at_s": 1, "action": "bandwidth", "target": "node:2", "duration_s": 1, "rate_mbit": 1}
HOSTS = {"b1": {"netns": "b1"}, "b2": {"netns": "b2"}, "b3": {"netns": "b3"}, "lg": {"netns": "lg"}}
PER_NODE = {"broker": ["b1", "b2", "b3"], "producers": ["lg"], "consumers": ["lg"]}
R3 = {"mode": "jetstream", "servers": 3, "replicas": 3}


def raw(system: str = "nats", broker: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    placement = extra.pop("placement", PER_NODE)
    top = {"hosts": HOSTS} | extra  # a test may bring hosts of its own
    return one_system(system, R3 if broker is None else broker, workload={"placement": placement}, **top)


def test_a_partition_and_a_squeeze_on_nodes_of_their_own_are_cells() -> None:
    (cell,) = parse(raw(faults=[PARTITION, {**SQUEEZE, "at_s": 2.5, "duration_s": 0.5}])).cells
    partition, squeeze = cell.spec.faults
    assert (partition.action, partition.rate_mbit) == ("partition", None)
    assert (squeeze.action, squeeze.rate_mbit) == ("bandwidth", 1)
    assert "fault:partition@1s/leader 1s fault:bandwidth@2.5s/node:2 0.5s 1Mbit" in cell.label
    assert "broker@b1+b2+b3" in cell.label
    dumped = cell.spec.model_dump(mode="json")["faults"]
    assert "rate_mbit" not in dumped[0] and dumped[1]["rate_mbit"] == 1  # a fault without a rate keeps its id


def test_one_host_per_node_maps_nodes_to_hosts_in_order() -> None:
    (cell,) = parse(raw()).cells
    assert cell.spec.workload.placement.broker_hosts() == ["b1", "b2", "b3"]
    plan = resolve_placement(cell, "t0")
    assert plan.node_hosts == {1: "b1", 2: "b2", 3: "b3"}
    assert plan.node_sites == {n: (f"sixnines-t0-b{n}", f"10.99.0.{n + 1}") for n in (1, 2, 3)}
    assert plan.broker_site() == ("sixnines-t0-sw", netns.CONTROL_ADDRESS)  # reaches every node
    (shared,) = parse(raw(placement={**PER_NODE, "broker": "b1"})).cells
    shared_plan = resolve_placement(shared, "t0")
    assert shared_plan.node_sites is None and shared_plan.node_links() is None


@pytest.mark.parametrize(
    ("fault", "field", "words"),
    [
        ({**PARTITION, "duration_s": None}, "faults[0]: duration_s", "required for action 'partition'"),
        ({**SQUEEZE, "rate_mbit": None}, "faults[0]: rate_mbit", "required for action 'bandwidth'"),
        ({**SQUEEZE, "duration_s": None}, "faults[0]: duration_s", "required for action 'bandwidth'"),
        ({**PARTITION, "rate_mbit": 5}, "faults[0]: rate_mbit", "only for action 'bandwidth'"),
        ({**SQUEEZE, "rate_mbit": 0}, "faults[0].rate_mbit", "greater than 0"),
        ({**PARTITION, "duration_s": 2.5}, "faults[0].duration_s: 2.5", "the partition would outlast"),
        ({**SQUEEZE, "target": "node:4"}, "faults[0].target: 'node:4'", "node:1, node:2, node:3"),
    ],
)
def test_link_fault_refusals_name_the_field(fault: dict[str, Any], field: str, words: str) -> None:
    fault = {k: v for k, v in fault.items() if v is not None}
    found = problems(raw(faults=[fault]))
    assert any(p.startswith(field) and words in p for p in found), found


def test_a_link_fault_needs_a_host_per_node() -> None:
    """On one broker host every node shares one link: there is no node's own link to cut."""
    shared = {"b1": {"netns": "b1"}, "lg": {"netns": "lg"}}
    for data in (
        raw(faults=[PARTITION], placement={**PER_NODE, "broker": "b1"}, hosts=shared),
        {**raw(faults=[SQUEEZE]), "workload": {"message_size_bytes": 64, "rate_per_s": 100, "measure_s": 3}},
    ):
        found = problems(data)
        assert any(
            p.startswith("faults[0].action:") and "workload.placement.broker as a list of network-namespace" in p
            for p in found
        ), found


KAFKA_RF3 = {"brokers": 3, "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}


def test_kafka_nodes_on_hosts_of_their_own_take_link_faults_on_every_target() -> None:
    """KRaft nodes 1..3 on b1..b3: a partition and a squeeze aimed at the leader, a node, a random node or the
    controller are cells."""
    for target in ("leader", "node:2", "random", "controller", "follower"):
        faults = [{**PARTITION, "target": target}, {**SQUEEZE, "at_s": 2.5, "duration_s": 0.5, "target": target}]
        (cell,) = parse(raw("kafka", KAFKA_RF3, faults=faults)).cells
        assert resolve_placement(cell).node_hosts == {1: "b1", 2: "b2", 3: "b3"}
        assert [f.action for f in cell.spec.faults] == ["partition", "bandwidth"]


def test_kafka_link_faults_on_one_shared_host_are_refused_naming_the_field() -> None:
    """Three Kafka nodes in one namespace share its link: a partition would cut them all."""
    shared = {"b1": {"netns": "b1"}, "lg": {"netns": "lg"}}
    found = problems(raw("kafka", KAFKA_RF3, faults=[PARTITION], placement={**PER_NODE, "broker": "b1"}, hosts=shared))
    assert any(p.startswith("faults[0].action: 'partition' acts on one node's own") for p in found), found


def test_a_system_without_link_faults_refuses_them_naming_what_it_supports() -> None:
    found = problems(raw("redis", {}, faults=[PARTITION], placement={**PER_NODE, "broker": "b1"}))
    assert any(p.startswith("faults[0].action: 'partition' — redis supports:") for p in found), found


@pytest.mark.parametrize(
    ("system", "broker", "placement", "hosts_map", "words"),
    [
        ("redis", {}, PER_NODE, HOSTS, "one host per node is not supported by redis; name one host"),
        ("kafka", {"brokers": 1}, PER_NODE, HOSTS, "3 hosts for 1 node(s) (node:1)"),
        ("nats", R3, {**PER_NODE, "broker": ["b1", "b2"]}, HOSTS, "2 hosts for 3 node(s) (node:1, node:2, node:3)"),
        ("nats", R3, {**PER_NODE, "broker": ["b1", "b1", "b2"]}, HOSTS, "names a host twice"),
        ("nats", R3, {**PER_NODE, "broker": []}, HOSTS, "an empty list"),
        ("nats", R3, {**PER_NODE, "broker": ["b1", "b2", "b4"]}, HOSTS, "unknown host 'b4'"),
        ("nats", R3, PER_NODE, {**HOSTS, "b3": {}}, "needs network-namespace hosts (`netns`); b3 is not"),
    ],
)
def test_one_host_per_node_refusals_name_the_field(
    system: str, broker: dict[str, Any], placement: dict[str, Any], hosts_map: dict[str, Any], words: str
) -> None:
    found = problems(raw(system, broker, placement=placement, hosts=hosts_map))
    assert any("workload.placement.broker" in p and words in p for p in found), found


def test_a_single_nats_server_on_a_host_of_its_own_is_node_0() -> None:
    (cell,) = parse(raw(broker={"mode": "core"}, placement={**PER_NODE, "broker": ["b1"]}, faults=[PARTITION])).cells
    assert resolve_placement(cell).node_hosts == {0: "b1"}
