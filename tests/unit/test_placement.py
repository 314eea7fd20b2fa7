"""Matrix `hosts:`, `workload.placement` and `network:`: validation that names the field, the clock-domain rule,
unchanged ids for matrices that do not use them, and the queue the generator's tasks run on."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bench_tasks.errors import CellError, MatrixError
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Matrix
from bench_tasks.topology.plan import generator_queue, resolve_placement

from .test_matrix import BASE_CELL_ID, BASE_SERIES_KEY, base_raw

HOSTS = {
    "brokerhost": {"netns": "broker"},
    "loadgen1": {"queue": "loadgen_1", "netns": "lg1"},
    "loadgen2": {"queue": "loadgen_2", "netns": "lg2"},
}


def placed(placement: dict[str, Any] | None = None, measurement: str = "e2e", **extra: Any) -> dict[str, Any]:
    raw = base_raw()
    raw["hosts"] = copy.deepcopy(HOSTS)
    raw["measurements"] = [measurement]
    raw["workload"].update(producers=2, consumers=2, rate_per_s=100)
    raw["workload"]["placement"] = placement or {
        "broker": "brokerhost",
        "producers": ["loadgen1", "loadgen2"],
        "consumers": ["loadgen1", "loadgen2"],
    }
    raw.update(extra)
    return raw


def parse(raw: dict[str, Any]) -> Matrix:
    return parse_matrix(raw, "matrices/t.yaml")


def problems(raw: dict[str, Any]) -> str:
    with pytest.raises(MatrixError) as info:
        parse(raw)
    return "\n".join(info.value.problems)


def test_hosts_declared_but_unused_keep_the_pinned_ids() -> None:
    raw = base_raw()
    raw["hosts"] = copy.deepcopy(HOSTS)
    (cell,) = parse(raw).cells
    assert (cell.id, cell.series_key) == (BASE_CELL_ID, BASE_SERIES_KEY)
    assert "hosts" not in cell.spec.model_dump(mode="json")
    assert "placement" not in cell.spec.model_dump(mode="json")["workload"]


def test_a_placement_makes_a_new_cell_carrying_only_its_hosts() -> None:
    raw = placed({"broker": "brokerhost", "producers": ["loadgen1"], "consumers": ["loadgen1"]})
    (cell,) = parse(raw).cells
    assert cell.id != BASE_CELL_ID
    assert sorted(cell.spec.hosts or {}) == ["brokerhost", "loadgen1"]  # loadgen2 is not used
    assert cell.label.endswith("on loadgen1 broker@brokerhost")
    raw["hosts"]["spare"] = {"queue": "loadgen_9"}  # an unused host does not change the id
    assert parse(raw).cells[0].id == cell.id


def test_unknown_host_is_named() -> None:
    text = problems(placed({"broker": "brokerhost", "producers": ["loadgen1", "loadgen7"], "consumers": ["loadgen1"]}))
    assert "workload.placement.producers: unknown host 'loadgen7'; hosts: brokerhost, loadgen1, loadgen2" in text


def test_placement_without_hosts() -> None:
    raw = placed()
    del raw["hosts"]
    assert "workload.placement: needs a top-level `hosts:` map" in problems(raw)


def test_bad_host_name_and_netns_name() -> None:
    raw = placed()
    raw["hosts"]["Load-1"] = {}
    assert "hosts: host name 'Load-1': use lower case letters" in problems(raw)
    raw = placed()
    raw["hosts"]["loadgen2"]["netns"] = "has space"
    assert "hosts.loadgen2.netns: 'has space' — use 1-16 lower case letters" in problems(raw)


def test_one_way_latency_across_clock_domains_is_refused() -> None:
    raw = placed({"broker": "brokerhost", "producers": ["loadgen1", "loadgen2"], "consumers": ["loadgen1"]})
    raw["workload"]["consumers"] = 1
    text = problems(raw)
    assert "measurement 'e2e' is one-way latency" in text
    assert "use measurement rtt, or place consumers with producers".lower() in text.lower()


def test_consumers_on_another_host_than_the_producers_is_refused() -> None:
    text = problems(placed({"broker": "brokerhost", "producers": ["loadgen1"], "consumers": ["loadgen2"]}))
    assert "producers run in clock domain(s) loadgen1 and consumers in loadgen2" in text


def test_rtt_and_publish_measure_on_one_clock_and_are_accepted() -> None:
    apart = {"broker": "brokerhost", "producers": ["loadgen1"], "consumers": ["loadgen2"]}
    (cell,) = parse(placed(apart, "rtt")).cells
    assert cell.spec.measurement == "rtt"


def test_a_shared_clock_domain_or_a_measured_offset_is_accepted() -> None:
    apart = {"broker": "brokerhost", "producers": ["loadgen1"], "consumers": ["loadgen2"]}
    raw = placed(apart)
    raw["hosts"]["loadgen1"]["clock_domain"] = raw["hosts"]["loadgen2"]["clock_domain"] = "ptp_rack_a"
    assert len(parse(raw).cells) == 1
    offset = placed({**apart, "cross_host_clock": "measure_offset"})
    (cell,) = parse(offset).cells
    assert cell.spec.workload.placement is not None
    assert cell.spec.workload.placement.cross_host_clock == "measure_offset"


def test_each_clock_domain_gets_its_own_route() -> None:
    plan = resolve_placement(parse(placed()).cells[0])
    assert [plan.worker_route("producer", i) for i in range(2)] == ["d_loadgen1", "d_loadgen2"]
    assert [plan.worker_route("consumer", i) for i in range(2)] == ["d_loadgen1", "d_loadgen2"]
    assert plan.routes == ("d_loadgen1", "d_loadgen2")
    rtt = resolve_placement(parse(placed(measurement="rtt")).cells[0])
    assert rtt.worker_route("producer", 1) == "" and rtt.routes == ()  # rtt is timed on one clock: one subject


def test_namespace_hosts_need_the_broker_placed_and_no_mixing() -> None:
    assert "workload.placement.broker: required when roles run in network namespaces" in problems(
        placed({"producers": ["loadgen1"], "consumers": ["loadgen1"]})
    )
    raw = placed({"broker": "brokerhost", "producers": ["loadgen1", "real"], "consumers": ["loadgen1", "real"]})
    raw["hosts"]["real"] = {"queue": "loadgen_3"}
    assert "a cell uses namespace hosts only or real hosts only" in problems(raw)


def test_more_hosts_than_producers() -> None:
    raw = placed()
    raw["workload"]["producers"] = 1
    assert "workload.placement.producers: 2 hosts for workload.producers=1" in problems(raw)


def test_network_cap_validation_and_netem_refusal() -> None:
    (cell,) = parse(placed(network={"rate_mbit": 100})).cells
    assert cell.spec.network is not None and cell.spec.network.burst_bytes() == 125_000
    assert cell.label.endswith("cap 100Mbit")
    text = problems(placed(network={"rate_mbit": 100, "delay_ms": 5}))
    assert "delay_ms: tc netem (delay, loss) is not available" in text
    raw = base_raw()
    raw["network"] = {"rate_mbit": 100}
    assert "network: caps links between hosts; it needs workload.placement" in problems(raw)
    assert "rate_mbit" in problems(placed(network={"rate_mbit": 0}))


def test_network_rate_is_an_axis() -> None:
    raw = placed(network={"rate_mbit": 1000}, axes={"network.rate_mbit": [1000, 10]})
    cells = parse(raw).cells
    assert sorted(c.spec.network.rate_mbit for c in cells if c.spec.network) == [10, 1000]
    assert len({c.id for c in cells}) == 2


def test_kafka_and_nats_clusters_may_run_in_a_namespace() -> None:
    raw = placed()
    raw["systems"] = [
        {"system": "kafka", "versions": ["latest"], "broker": {"brokers": 3, "replication_factor": 3}},
        {"system": "nats", "versions": ["latest"], "broker": {"mode": "jetstream", "servers": 3, "replicas": 3}},
    ]
    cells = parse(raw).cells
    assert sorted(c.spec.system for c in cells) == ["kafka", "nats"]
    assert all(c.spec.workload.placement and c.spec.workload.placement.broker == "brokerhost" for c in cells)


def test_external_brokers_cannot_be_reached_from_namespace_hosts() -> None:
    raw = placed()
    raw["systems"] = [{"system": "kafka", "brokers": "external", "connection": "sixnines_kafka_external"}]
    text = problems(raw)
    assert "workload.placement: hosts brokerhost, loadgen1, loadgen2 are network namespaces" in text
    raw["hosts"] = {name: {"queue": host.get("queue", "default")} for name, host in HOSTS.items()}
    raw["workload"]["placement"] = {"producers": ["loadgen1"], "consumers": ["loadgen1"]}
    (cell,) = parse(raw).cells  # real hosts: fine
    assert cell.spec.brokers == "external"


def test_generator_queue_follows_the_load_hosts() -> None:
    (cell,) = parse(placed({"broker": "brokerhost", "producers": ["loadgen2"], "consumers": ["loadgen2"]})).cells
    assert generator_queue(cell) == "loadgen_2"
    (local,) = parse(base_raw()).cells
    assert generator_queue(local) is None


def real_hosts(**extra: Any) -> dict[str, Any]:
    raw = placed({"producers": ["a", "b"], "consumers": ["a", "b"]}, **extra)
    raw["hosts"] = {"a": {"queue": "loadgen_1"}, "b": {"queue": "loadgen_2"}}
    return raw


def test_real_hosts_get_one_generator_each_on_their_own_queue() -> None:
    plan = resolve_placement(parse(real_hosts()).cells[0])
    assert plan.per_host and plan.load_hosts == ("a", "b")
    assert [plan.queue_of(h) for h in plan.load_hosts] == ["loadgen_1", "loadgen_2"]
    assert plan.generator_queue is None  # no single generator: each host's generate task has its own queue
    plan.check_runnable()
    assert not resolve_placement(parse(placed()).cells[0]).per_host  # namespace hosts: one machine, one generator


def test_what_real_hosts_cannot_do_is_refused_when_the_cell_starts() -> None:
    (cell,) = parse(real_hosts()).cells
    with pytest.raises(CellError, match=r"faults \(stall, kill\): not with load on real hosts"):
        resolve_placement(cell, faults=[{"kind": "stall", "at_s": 1}]).check_runnable()
    raw = real_hosts()
    raw["systems"] = [{"system": "kafka", "versions": ["4.3.1"], "broker": {"brokers": 1}}]
    raw["systems"][0]["background"] = {"noise": {"message_size_bytes": 100, "rate_per_producer_per_s": 1}}
    with pytest.raises(CellError, match="background: not with load on real hosts"):
        resolve_placement(parse(raw).cells[0]).check_runnable()
    raw["systems"] = [
        {"system": "kafka", "versions": ["4.3.1"], "broker": {"brokers": 1}, "client": {"security": "sasl_ssl"}}
    ]
    with pytest.raises(CellError, match=r"client\.security: sasl_ssl with load on real hosts needs brokers: external"):
        resolve_placement(parse(raw).cells[0]).check_runnable()


def test_documented_hosts_example_is_the_shipped_matrix() -> None:
    """docs/hosts-and-network.md's abridged matrices/netns_hosts.yaml says what the file says, and completed by
    the file's other keys it is a valid matrix."""
    import re
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "docs" / "hosts-and-network.md").read_text()
    (block,) = re.findall(r"```yaml\n(# matrices/netns_hosts\.yaml.*?)```", text, re.S)
    shown = yaml.safe_load(block)
    shipped = yaml.safe_load((repo / "matrices/netns_hosts.yaml").read_text())
    assert shown["hosts"] == shipped["hosts"]
    assert shown["network"] == shipped["network"] and shown["axes"] == shipped["axes"]
    assert shown["workload"]["placement"] == {"cross_host_clock": "refuse", **shipped["workload"]["placement"]}
    merged = {**shipped, **shown, "workload": {**shipped["workload"], **shown["workload"]}}
    assert len(parse(merged).cells) == len(parse(shipped).cells)
