"""A cell's placement plan: resolved once from the cell (namespaces named by a token), carrying where the broker and
every worker run, each host's queue, and whether the cell can run as placed; recorded as JSON and read back."""

from __future__ import annotations

import json

import pytest

import bench_tasks
from bench_tasks.errors import CellError
from bench_tasks.topology.netns import CONTROL_ADDRESS
from bench_tasks.topology.plan import PlacementPlan, resolve_placement
from tests.unit.matrices import one_system
from tests.unit.matrices import parse as parse_one

from .test_matrix import base_raw
from .test_placement import parse, placed, real_hosts


def test_a_local_cell_runs_everything_in_the_root_namespace_on_loopback() -> None:
    plan = resolve_placement(parse(base_raw()).cells[0])
    assert not plan.uses_netns and not plan.per_host and plan.topology is None
    assert plan.load_hosts == () and plan.generator_queue is None and plan.routes == ()
    assert plan.broker_site() == ("", "127.0.0.1")
    assert plan.host_of("producer", 0) is None
    assert (plan.worker_netns("consumer", 3), plan.worker_route("consumer", 3, "hop2")) == ("", "hop2")
    assert plan.node_hosts == {} and plan.node_sites is None and plan.node_links() is None
    plan.check_runnable()


def test_a_netns_cell_lays_out_its_namespaces_before_any_exists() -> None:
    """Namespaces named after the token, addresses in placement order (broker host first), every worker in its
    host's namespace; the generator's tasks on the first load host's queue."""
    (cell,) = parse(placed(network={"rate_mbit": 100})).cells
    plan = resolve_placement(cell, "t0", faults=[{"kind": "stall", "at_s": 1}])  # namespaces take faults
    assert plan.uses_netns and not plan.per_host
    topo = plan.topology
    assert topo is not None and topo.switch == "sixnines-t0-sw" and topo.network is not None
    assert {h: (n.netns, n.address, n.port) for h, n in topo.hosts.items()} == {
        "brokerhost": ("sixnines-t0-broker", "10.99.0.2", "p0"),
        "loadgen1": ("sixnines-t0-lg1", "10.99.0.3", "p1"),
        "loadgen2": ("sixnines-t0-lg2", "10.99.0.4", "p2"),
    }
    assert plan.broker_site() == ("sixnines-t0-broker", "10.99.0.2")
    assert [plan.worker_netns("producer", i) for i in range(3)] == [
        "sixnines-t0-lg1",
        "sixnines-t0-lg2",
        "sixnines-t0-lg1",
    ]
    assert plan.worker_netns("relay", 1) == "sixnines-t0-lg2"  # relays go with the consumers
    assert plan.load_hosts == ("loadgen1", "loadgen2") and plan.generator_queue == "loadgen_1"
    assert plan.refusal is None and plan.node_sites is None


def test_one_broker_host_per_node_puts_the_harness_on_the_bridge() -> None:
    hosts = {"b1": {"netns": "b1"}, "b2": {"netns": "b2"}, "b3": {"netns": "b3"}, "lg": {"netns": "lg"}}
    placement = {"broker": ["b1", "b2", "b3"], "producers": ["lg"], "consumers": ["lg"]}
    broker = {"mode": "jetstream", "servers": 3, "replicas": 3}
    (cell,) = parse_one(one_system("nats", broker, workload={"placement": placement}, hosts=hosts)).cells
    plan = resolve_placement(cell, "t1")
    assert plan.broker_site() == ("sixnines-t1-sw", CONTROL_ADDRESS)
    assert plan.node_sites == {1: ("sixnines-t1-b1", "10.99.0.2"), 2: ("sixnines-t1-b2", "10.99.0.3"),
                               3: ("sixnines-t1-b3", "10.99.0.4")}  # fmt: skip
    links = plan.node_links()
    assert links is not None and dict(links.hosts) == {1: "b1", 2: "b2", 3: "b3"}
    assert plan.node_links() is not links  # each holds what its own faults cut


def test_load_on_real_hosts_gets_a_generator_per_host_and_this_hosts_address(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = resolve_placement(parse(real_hosts()).cells[0])
    assert plan.per_host and not plan.uses_netns
    assert plan.load_hosts == ("a", "b") and dict(plan.queues) == {"a": "loadgen_1", "b": "loadgen_2"}
    assert plan.generator_queue is None  # each host's generate task runs on its own queue
    assert [plan.host_of("producer", i) for i in range(3)] == ["a", "b", "a"]
    assert plan.worker_netns("producer", 1) == ""
    assert plan.routes == ("d_a", "d_b") and plan.worker_route("consumer", 1) == "d_b"  # a clock domain each
    assert plan.broker_address is None  # where the load hosts reach this host: asked when the broker starts
    monkeypatch.setenv("SIXNINES_HOST_ADDRESS", "192.0.2.7")
    assert plan.broker_site() == ("", "192.0.2.7")


def test_a_cell_real_hosts_cannot_run_resolves_and_is_refused_when_it_starts_as_before() -> None:
    """Resolving never raises (a DAG resolves plans at parse time); the refusal is the error it always was."""
    (cell,) = parse(real_hosts()).cells
    plan = resolve_placement(cell, faults=[{"kind": "stall", "at_s": 1}])
    with pytest.raises(CellError) as raised:
        plan.check_runnable()
    assert str(raised.value) == (
        f"cell {cell.id} failed: faults (stall, kill): not with load on real hosts (workload.placement); "
        "use netns hosts"
    )
    assert raised.value.cell_id == cell.id
    resolve_placement(cell).check_runnable()  # without faults it runs


@pytest.mark.parametrize("raw", [base_raw(), placed(network={"rate_mbit": 100}), real_hosts()])
def test_the_plan_reads_back_from_its_json_as_it_was(raw: dict) -> None:
    plan = resolve_placement(parse(raw).cells[0], "t2")
    assert PlacementPlan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


def test_a_per_node_plan_reads_back_with_its_node_ids() -> None:
    hosts = {"b1": {"netns": "b1"}, "lg": {"netns": "lg"}}
    placement = {"broker": ["b1"], "producers": ["lg"], "consumers": ["lg"]}
    (cell,) = parse_one(one_system("nats", {"mode": "core"}, workload={"placement": placement}, hosts=hosts)).cells
    plan = resolve_placement(cell, "t3")
    again = PlacementPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan and again.node_hosts == {0: "b1"}


def test_the_public_names_answer_from_the_plan() -> None:
    """What the DAG side may ask of a cell one question at a time says what the plan says."""
    for raw in (placed(), real_hosts(), base_raw()):
        (cell,) = parse(raw).cells
        plan = resolve_placement(cell)
        assert bench_tasks.per_host(cell) == plan.per_host
        assert bench_tasks.load_hosts(cell) == list(plan.load_hosts)
        assert bench_tasks.generator_queue(cell) == plan.generator_queue
        assert [bench_tasks.queue_of(cell, h) for h in plan.load_hosts] == [plan.queue_of(h) for h in plan.load_hosts]
    assert bench_tasks.resolve_placement is resolve_placement and bench_tasks.PlacementPlan is PlacementPlan
