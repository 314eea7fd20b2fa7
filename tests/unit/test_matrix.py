"""bench_tasks.matrix: expansion into cells, stable ids, and precise validation errors; the `cells` CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench_tasks.errors import MatrixError
from bench_tasks.spec.matrix import load_matrix, parse_matrix
from bench_tasks.spec.matrix_model import Matrix

REPO = Path(__file__).resolve().parents[2]
SOURCE = "matrices/under_test.yaml"
HEX12 = re.compile(r"^[0-9a-f]{12}$")

# Cell id and series key of BASE's single cell, computed once. If these change, every stored history
# loses its link to new runs: change them only together with a deliberate change of the spec model.
# Last changed when every cell gained `brokers` (provisioned | external) and `connection` (external brokers).
BASE_CELL_ID = "63f61b728e1e"
BASE_SERIES_KEY = "988871c88692"


def base_raw() -> dict[str, Any]:
    return {
        "name": "t",
        "systems": [{"system": "nats", "versions": ["2.15.1"]}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "measure_s": 1},
        "measurements": ["e2e"],
    }


def parse(raw: dict[str, Any]) -> Matrix:
    return parse_matrix(raw, SOURCE)


def reverse_keys(value: Any) -> Any:
    """The same data with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {k: reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reverse_keys(v) for v in value]
    return value


# --- expansion -----------------------------------------------------------------------------------------


def sweep_raw() -> dict[str, Any]:
    raw = base_raw()
    raw["systems"][0]["versions"] = ["2.15.1", "2.15.0"]
    raw["systems"][0]["axes"] = {"broker.mode": ["core", "jetstream"]}
    raw["measurements"] = ["e2e", "rtt"]
    raw["axes"] = {"workload.rate_per_s": [10, 100, 1000]}
    raw["exclude"] = [{"broker.mode": "jetstream", "measurement": "rtt"}]
    return raw


def test_cartesian_product_minus_excluded() -> None:
    matrix = parse(sweep_raw())
    # 2 versions x 2 measurements x 3 rates x 2 modes = 24, minus jetstream+rtt (2 x 3 rates) = 18
    assert len(matrix.cells) == 18
    combos = {
        (c.spec.version, c.spec.measurement, c.spec.workload.rate_per_s, c.spec.broker.mode) for c in matrix.cells
    }
    assert len(combos) == 18
    assert all(not (mode == "jetstream" and m == "rtt") for _, m, _, mode in combos)
    assert ("2.15.0", "rtt", 1000.0, "core") in combos
    assert ("2.15.1", "e2e", 10.0, "jetstream") in combos
    assert len({c.id for c in matrix.cells}) == 18
    assert all(c.matrix == "t" for c in matrix.cells)
    assert matrix.source == SOURCE


def test_exclude_rule_with_list_of_values() -> None:
    raw = sweep_raw()
    raw["exclude"].append({"version": "2.15.0", "workload.rate_per_s": [10, 100]})
    matrix = parse(raw)
    # of the 18, the 9 cells of 2.15.0 lose their rate-10 and rate-100 cells (6): 12 remain
    assert len(matrix.cells) == 12
    old = [c for c in matrix.cells if c.spec.version == "2.15.0"]
    assert len(old) == 3
    assert {c.spec.workload.rate_per_s for c in old} == {1000.0}


def test_exclude_removing_every_cell_is_an_error() -> None:
    raw = base_raw()
    raw["exclude"] = [{"measurement": "e2e"}]
    with pytest.raises(MatrixError, match="exclude rules remove every cell"):
        parse(raw)


def test_invalid_combination_not_excluded_is_reported_with_its_cell() -> None:
    raw = sweep_raw()
    del raw["exclude"]
    with pytest.raises(MatrixError) as info:
        parse(raw)
    text = str(info.value)
    assert SOURCE in text
    assert "broker.mode='jetstream'" in text
    assert "measurement='rtt'" in text
    assert "use 'publish' for JetStream acks" in text


def test_defaults_filled_in() -> None:
    (cell,) = parse(base_raw()).cells
    w = cell.spec.workload
    assert (w.producers, w.consumers, w.connections) == (1, 1, 1)
    assert (w.warmup_s, w.measure_s, w.cooldown_s) == (2.0, 1.0, 1.0)
    assert (w.arrival, w.payload, w.seed) == ("uniform", "random", 0)
    assert (w.drain_timeout_s, w.request_timeout_s, w.max_schedule_lag_ms) == (5.0, 10.0, 100.0)
    assert cell.spec.system == "nats"
    b = cell.spec.broker
    assert (b.mode, b.storage, b.sync_interval, b.servers, b.replicas, b.server) == (
        "core",
        "memory",
        "default",
        1,
        1,
        {},
    )
    assert cell.spec.client.connect == {}
    assert cell.label == "nats/core 2.15.1 e2e 64B @100/s p1 c1"


@pytest.mark.parametrize(("servers", "replicas"), [(3, 3), (3, 1)])
def test_nats_jetstream_cluster_is_a_valid_cell(servers: int, replicas: int) -> None:
    raw = base_raw()
    raw["systems"][0]["broker"] = {"mode": "jetstream", "servers": servers, "replicas": replicas}
    (cell,) = parse(raw).cells
    assert (cell.spec.broker.servers, cell.spec.broker.replicas) == (servers, replicas)
    assert cell.label.startswith(f"nats/jetstream n{servers} R{replicas} 2.15.1 e2e")
    assert cell.id != BASE_CELL_ID


# --- ids -----------------------------------------------------------------------------------------------


def test_cell_id_is_12_hex_and_stable_literal() -> None:
    (cell,) = parse(base_raw()).cells
    assert HEX12.match(cell.id)
    assert HEX12.match(cell.series_key)
    assert cell.id == BASE_CELL_ID
    assert cell.series_key == BASE_SERIES_KEY


def test_cell_id_same_for_same_spec() -> None:
    assert parse(base_raw()).cells[0].id == parse(base_raw()).cells[0].id


def test_cell_id_independent_of_key_order() -> None:
    raw = sweep_raw()
    reordered = reverse_keys(raw)
    assert list(reordered) != list(raw)
    ids = sorted(c.id for c in parse(raw).cells)
    assert sorted(c.id for c in parse(reordered).cells) == ids
    assert parse(reverse_keys(base_raw())).cells[0].id == BASE_CELL_ID


def test_explicit_defaults_give_the_same_id() -> None:
    raw = base_raw()
    raw["workload"].update(producers=1, warmup_s=2, arrival="uniform", rate_per_s=100.0)
    raw["systems"][0]["broker"] = {"mode": "core", "storage": "memory"}
    assert parse(raw).cells[0].id == BASE_CELL_ID


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r["workload"].update(rate_per_s=101),
        lambda r: r["workload"].update(message_size_bytes=65),
        lambda r: r["workload"].update(seed=1),
        lambda r: r["workload"].update(arrival="poisson"),
        lambda r: r["systems"][0].update(broker={"storage": "file"}),
        lambda r: r["systems"][0].update(client={"connect": {"name": "x"}}),
        lambda r: r.update(measurements=["rtt"]),
        lambda r: r["workload"].update(cpus={"producers_share": 0.05}),
    ],
)
def test_different_specs_give_different_ids(change: Callable[[dict[str, Any]], None]) -> None:
    raw = base_raw()
    change(raw)
    (cell,) = parse(raw).cells
    assert cell.id != BASE_CELL_ID
    assert cell.series_key != BASE_SERIES_KEY


def test_a_cpu_share_must_be_a_positive_number_of_cpus() -> None:
    raw = base_raw()
    raw["workload"]["cpus"] = {"receivers_share": 0}
    with pytest.raises(MatrixError, match=r"workload\.cpus\.receivers_share"):
        parse(raw)


def test_matrix_name_is_not_part_of_the_id() -> None:
    raw = base_raw()
    raw["name"] = "other"
    raw["description"] = "something"
    assert parse(raw).cells[0].id == BASE_CELL_ID


def test_series_key_ignores_version() -> None:
    raw = base_raw()
    raw["systems"][0]["versions"] = ["2.15.1", "2.14.0"]
    a, b = parse(raw).cells
    assert {a.spec.version, b.spec.version} == {"2.15.1", "2.14.0"}
    assert a.id != b.id
    assert a.series_key == b.series_key == BASE_SERIES_KEY


# --- errors --------------------------------------------------------------------------------------------

ERROR_CASES: list[tuple[str, Callable[[dict[str, Any]], None], list[str]]] = [
    ("unknown top-level key", lambda r: r.update(bogus=1), ["bogus", "unknown key"]),
    ("unknown workload key", lambda r: r["workload"].update(rate=5), ["workload.rate:", "unknown key"]),
    ("wrong type", lambda r: r["workload"].update(rate_per_s="fast"), ["workload.rate_per_s", "'fast'"]),
    (
        "zero rate",
        lambda r: r["workload"].update(rate_per_s=0),
        ["workload.rate_per_s: 0 ", "greater than 0"],
    ),
    (
        "negative rate",
        lambda r: r["workload"].update(rate_per_s=-5),
        ["workload.rate_per_s: -5 ", "greater than 0"],
    ),
    ("zero size", lambda r: r["workload"].update(message_size_bytes=0), ["workload.message_size_bytes: 0 "]),
    (
        "size below header",
        lambda r: r["workload"].update(message_size_bytes=31),
        ["workload.message_size_bytes: 31 ", "32-byte payload header"],
    ),
    (
        "measure too short",
        lambda r: r["workload"].update(measure_s=0.001),
        ["workload", "measure_s=0.001", "fewer than one message"],
    ),
    (
        "measure too short for streams",
        lambda r: r["workload"].update(measure_s=1, rate_per_s=3, producers=4),
        ["workload", "measure_s=1.0", "rate_per_s=3.0", "4 sending streams"],
    ),
    ("unknown system", lambda r: r["systems"][0].update(system="pulsar"), ["systems[0].system", "'pulsar'"]),
    (
        "unknown version",
        lambda r: r["systems"][0].update(versions=["2.15.1", "9.9.9"]),
        ["systems[0].versions[1]", "'9.9.9'", "unknown nats version"],
    ),
    ("empty versions", lambda r: r["systems"][0].update(versions=[]), ["systems[0].versions", "at least one release"]),
    (
        "empty axis",
        lambda r: r.update(axes={"workload.rate_per_s": []}),
        ["axes.workload.rate_per_s", "empty list"],
    ),
    (
        "unknown axis path",
        lambda r: r.update(axes={"foo.bar": [1]}),
        ["axes.foo.bar", "unknown axis path 'foo.bar'"],
    ),
    (
        "bare axis root",
        lambda r: r.update(axes={"workload": [{}]}),
        ["axes.workload", "unknown axis path 'workload'"],
    ),
    (
        "bad axis value",
        lambda r: r.update(axes={"workload.rate_per_s": [10, "fast"]}),
        ["axes.workload.rate_per_s[1]", "'fast'"],
    ),
    (
        "bad system axis value",
        lambda r: r["systems"][0].update(axes={"broker.mode": ["core", "bogus"]}),
        ["axes.broker.mode[1]", "'bogus'"],
    ),
    (
        "axis value violating a model rule",
        lambda r: r.update(axes={"workload.measure_s": [1, 0.001]}),
        ["axes.workload.measure_s[1]", "0.001", "fewer than one message"],
    ),
    (
        "publish on core",
        lambda r: r.update(measurements=["publish"]),
        ["measurement 'publish'", "broker.mode 'jetstream'"],
    ),
    (
        "publish on core next to e2e",
        lambda r: r.update(measurements=["e2e", "publish"]),
        ["measurement='publish'", "broker.mode 'jetstream'"],
    ),
    (
        "exclude names a non-axis",
        lambda r: r.update(exclude=[{"workload.producers": 2}]),
        ["exclude[0].workload.producers", "not an axis"],
    ),
    (
        "bad broker setting",
        lambda r: r["systems"][0].update(broker={"mode": "x"}),
        ["systems[0].broker.mode", "'x'"],
    ),
    (
        "missing workload field",
        lambda r: r["workload"].pop("measure_s"),
        ["workload.measure_s", "Field required"],
    ),
    ("bad name", lambda r: r.update(name="Bad Name"), ["name", "'Bad Name'"]),
    (
        "nats replicas over servers",
        lambda r: r["systems"][0].update(broker={"mode": "jetstream", "servers": 1, "replicas": 3}),
        ["systems[0].broker", "replicas 3 exceeds servers 1"],
    ),
    (
        "nats cluster in core mode",
        lambda r: r["systems"][0].update(broker={"mode": "core", "servers": 3}),
        ["systems[0].broker", "servers 3", "mode 'jetstream'"],
    ),
    (
        "nats servers not 1 or 3",
        lambda r: r["systems"][0].update(broker={"mode": "jetstream", "servers": 2}),
        ["systems[0].broker.servers", "2"],
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_errors_name_source_field_and_value(mutate: Callable[[dict[str, Any]], None], expected: list[str]) -> None:
    raw = base_raw()
    mutate(raw)
    with pytest.raises(MatrixError) as info:
        parse(raw)
    error = info.value
    text = str(error)
    assert error.source == SOURCE
    assert text.startswith(f"{SOURCE}: invalid matrix")
    assert error.problems
    for fragment in expected:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    assert error.exit_code == 2


def test_all_problems_are_reported_at_once() -> None:
    raw = base_raw()
    raw["workload"].update(rate_per_s=0, message_size_bytes=1)
    with pytest.raises(MatrixError) as info:
        parse(raw)
    assert sorted(p.split(":")[0] for p in info.value.problems) == [
        "workload.message_size_bytes",
        "workload.rate_per_s",
    ]


def test_axis_through_a_scalar_names_the_source_file() -> None:
    raw = base_raw()
    raw["axes"] = {"workload.rate_per_s.x": [1]}
    with pytest.raises(MatrixError) as info:
        parse(raw)
    assert info.value.source == SOURCE


# --- load_matrix ---------------------------------------------------------------------------------------


def test_load_matrix_reads_yaml(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(base_raw()))
    matrix = load_matrix(path)
    assert matrix.source == str(path)
    assert [c.id for c in matrix.cells] == [BASE_CELL_ID]


def test_load_matrix_invalid_yaml(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert str(path) in str(info.value)
    assert "not valid YAML" in str(info.value)


def test_load_matrix_top_level_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(MatrixError, match="top level must be a mapping, got list"):
        load_matrix(path)


def test_load_matrix_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert info.value.source == str(path)
    assert str(path) in str(info.value)
    assert "file not found" in str(info.value)


def test_load_matrix_error_names_the_file(tmp_path: Path) -> None:
    raw = base_raw()
    raw["systems"][0]["versions"] = ["2.15.1", "0.0.1"]
    path = tmp_path / "badversion.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    assert str(info.value).startswith(f"{path}: invalid matrix")
    assert "systems[0].versions[1]: '0.0.1'" in str(info.value)


def test_seed_matrix_covers_the_seeds_axes() -> None:
    cells = [c.spec for c in load_matrix(REPO / "matrices" / "kafka-seeds.yaml").cells]
    assert {c.workload.message_size_bytes for c in cells} >= {256, 1024, 5120, 1048576}
    assert {c.client.producer.get("acks") for c in cells} >= {"0", "1", "all"}
    assert {(c.broker.partitions, c.broker.replication_factor) for c in cells} >= {(1, 1), (1, 3), (3, 1), (3, 3)}
    assert {c.client.producer.get("linger.ms") for c in cells} >= {0, 1}
    traffic = {(bg.producers, bg.keys) for c in cells for bg in c.background.values()}
    assert traffic == {(0, "none"), (200, "none"), (200, "per_producer")}


def test_version_matrix_pairs_each_cell_across_a_3x_and_a_4x_release() -> None:
    from bench_tasks.cell.runner import select_cells

    cells = select_cells(load_matrix(REPO / "matrices" / "kafka-versions.yaml"))
    by_series: dict[str, set[str]] = {}
    for cell in cells:
        by_series.setdefault(cell.series_key, set()).add(cell.spec.version.split(".")[0])
    assert len(by_series) == 2
    assert all(majors == {"3", "4"} for majors in by_series.values())


def test_quick_matrix_loads() -> None:
    matrix = load_matrix(REPO / "matrices" / "quick.yaml")
    assert matrix.name == "quick"
    combos = sorted((getattr(c.spec.broker, "mode", "kafka"), c.spec.measurement) for c in matrix.cells)
    assert combos == [
        ("core", "e2e"),
        ("core", "rtt"),
        ("jetstream", "e2e"),
        ("jetstream", "publish"),
        ("kafka", "e2e"),
    ]
    (kafka,) = [c.spec for c in matrix.cells if c.spec.system == "kafka"]
    assert kafka.broker.brokers == 1 and kafka.client.producer["acks"] == "1"  # one broker acknowledging alone


# --- CLI -----------------------------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400", "NO_COLOR": "1"}  # no line wrapping inside field paths
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_cells_bad_matrix_exits_2_without_traceback(tmp_path: Path) -> None:
    raw = base_raw()
    raw["axes"] = {"workload.rate_per_s": [10, "fast"]}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = run_cli("cells", str(path))
    assert result.returncode == 2, result.stderr
    assert "axes.workload.rate_per_s[1]" in result.stderr
    assert "'fast'" in result.stderr
    assert str(path) in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_cli_cells_missing_file_exits_2(tmp_path: Path) -> None:
    result = run_cli("cells", str(tmp_path / "missing.yaml"))
    assert result.returncode == 2
    assert "file not found" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_cli_error_text_is_not_parsed_as_markup(tmp_path: Path) -> None:
    raw = base_raw()
    raw["workload"]["[/oops]"] = 1
    path = tmp_path / "markup.yaml"
    path.write_text(yaml.safe_dump(raw))
    result = run_cli("cells", str(path))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "workload.[/oops]" in result.stderr


def test_cli_cells_quick_matrix_lists_five_cells() -> None:
    result = run_cli("cells", "matrices/quick.yaml")
    assert result.returncode == 0, result.stderr
    header, _columns, *lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert header.startswith("matrix quick: 5 cell(s)")
    assert len(lines) == 5
    for line in lines:
        cell_id, series, label = line.split(maxsplit=2)
        assert HEX12.match(cell_id)
        assert HEX12.match(series)
        assert label.startswith(("nats/", "kafka b1 "))
    assert len({line.split()[0] for line in lines}) == 5


def test_lagging_consumers_are_kafka_only_and_need_a_backlog() -> None:
    nats = base_raw()
    nats["workload"]["lagging_consumers"] = 1
    nats["workload"]["prefill_messages"] = 100
    with pytest.raises(MatrixError, match="Kafka cells only"):
        parse_matrix(nats, "m.yaml")
    kafka = base_raw()
    kafka["systems"] = [{"system": "kafka", "versions": ["latest"]}]
    kafka["workload"]["lagging_consumers"] = 1
    with pytest.raises(MatrixError, match="prefill_messages"):
        parse_matrix(kafka, "m.yaml")
    kafka["workload"]["prefill_messages"] = 100
    (cell,) = parse_matrix(kafka, "m.yaml").cells
    assert cell.spec.workload.lagging_consumers == 1


# --- background traffic and the service chain ----------------------------------------------------------


def kafka_raw() -> dict[str, Any]:
    raw = base_raw()
    raw["systems"] = [{"system": "kafka", "versions": ["4.3.1"], "broker": {"brokers": 3}}]
    return raw


TRAFFIC = {"message_size_bytes": 65536, "rate_per_producer_per_s": 1, "producers": 600, "partitions": 500}


def test_background_workload_and_its_axes() -> None:
    raw = kafka_raw()
    raw["systems"][0]["background"] = {"traffic": dict(TRAFFIC)}
    raw["systems"][0]["axes"] = {
        "background.traffic.keys": ["none", "per_producer"],
        "background.traffic.producer.acks": ["0", "1"],
    }
    cells = parse(raw).cells
    assert len(cells) == 4
    chosen = {(c.spec.background["traffic"].keys, c.spec.background["traffic"].producer["acks"]) for c in cells}
    assert chosen == {("none", "0"), ("none", "1"), ("per_producer", "0"), ("per_producer", "1")}
    traffic = cells[0].spec.background["traffic"]
    assert traffic.rate_per_s == 600
    assert (traffic.processes, traffic.consumers, traffic.replication_factor) == (1, 0, 1)
    assert "+bg traffic:600x65536B@1/s" in cells[0].label


def test_background_subscriptions_are_in_the_label_and_one_dumps_as_before() -> None:
    """Several subscriptions change the cell (its id, its label); one, the default, leaves the spec's dump and so
    every existing background cell's id as it was."""
    raw = kafka_raw()
    raw["systems"][0]["background"] = {"traffic": {**TRAFFIC, "consumers": 1}}
    raw["systems"][0]["axes"] = {"background.traffic.subscriptions": [1, 3]}
    one, three = parse(raw).cells
    assert "subs=" not in one.label and "subs=3" in three.label
    assert "subscriptions" not in one.spec.model_dump(mode="json")["background"]["traffic"]
    assert three.spec.background["traffic"].subscriptions == 3


def test_background_switched_off_by_zero_producers_is_its_own_cell() -> None:
    raw = kafka_raw()
    raw["systems"][0]["background"] = {"traffic": dict(TRAFFIC)}
    raw["systems"][0]["axes"] = {"background.traffic.producers": [0, 600]}
    quiet, loaded = parse(raw).cells
    assert quiet.id != loaded.id
    assert "+bg" not in quiet.label


@pytest.mark.parametrize(
    ("system", "background", "fragment"),
    [
        ("nats", {"traffic": {**TRAFFIC}}, "background.traffic: partitions apply to Kafka only"),
        ("kafka", {"traffic": {**TRAFFIC, "replication_factor": 3}}, "replication_factor 3 exceeds broker.brokers 1"),
        ("kafka", {"Traffic": {"message_size_bytes": 64, "rate_per_producer_per_s": 1}}, "background name 'Traffic'"),
        ("kafka", {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "processes": 2}}, "processes 2"),
        ("kafka", {"t": {"message_size_bytes": 8, "rate_per_producer_per_s": 1}}, "32-byte payload header"),
        ("kafka", {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "colour": 1}}, "t.colour"),
        ("kafka", {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "subscriptions": 0}}, "subscriptions"),
        (
            "kafka",
            {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "subscriptions": 2}},
            "subscriptions 2 needs consumers >= 1",
        ),
        (
            "nats",
            {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "consumers": 1, "subscriptions": 2}},
            "background.t: subscriptions apply to Kafka only",
        ),
        (
            "rabbitmq",
            {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "consumers": 1, "subscriptions": 2}},
            "background.t: subscriptions apply to Kafka only",
        ),
        (
            "redis",
            {"t": {"message_size_bytes": 64, "rate_per_producer_per_s": 1, "consumers": 1, "subscriptions": 2}},
            "background.t: subscriptions apply to Kafka only",
        ),
    ],
)
def test_background_errors_name_the_field(system: str, background: dict, fragment: str) -> None:
    raw = base_raw()
    raw["systems"] = [{"system": system, "versions": ["latest"], "background": background}]
    with pytest.raises(MatrixError) as info:
        parse(raw)
    assert fragment in str(info.value)


def test_chain_needs_room_for_the_relay_stamp_and_relays_belong_to_chains() -> None:
    raw = base_raw()
    raw["measurements"] = ["chain"]
    raw["workload"]["message_size_bytes"] = 40
    with pytest.raises(MatrixError, match="message_size_bytes >= 48"):
        parse(raw)
    raw["workload"]["message_size_bytes"] = 48
    raw["workload"]["relays"] = 2
    (cell,) = parse(raw).cells
    assert cell.spec.measurement == "chain"
    assert "x2relays" in cell.label
    raw["measurements"] = ["e2e"]
    with pytest.raises(MatrixError, match="relays applies to measurement 'chain' only"):
        parse(raw)


def test_kafka_chain_refuses_hand_assigned_consumers() -> None:
    raw = kafka_raw()
    raw["measurements"] = ["chain"]
    raw["systems"][0]["client"] = {"consumer_mode": "assigned"}
    with pytest.raises(MatrixError, match="consumer_mode 'group'"):
        parse(raw)


# --- repeats -------------------------------------------------------------------------------------------


def test_repeats_keep_cell_ids_and_run_in_rounds() -> None:
    from bench_tasks.spec.repeats import expand_repeats

    raw = sweep_raw()
    once = parse(raw)
    raw["repeats"] = [{"when": {"broker.mode": "core", "measurement": "e2e"}, "times": 3}, {"times": 2}]
    repeated = parse(raw)
    assert [c.id for c in repeated.cells] == [c.id for c in once.cells]  # a repeat is the same cell
    times = {c.id: c.repeats for c in repeated.cells}
    core_e2e = {c.id for c in repeated.cells if c.spec.broker.mode == "core" and c.spec.measurement == "e2e"}
    assert {i: t for i, t in times.items() if t == 3}.keys() == core_e2e and set(times.values()) == {2, 3}
    runs = expand_repeats(repeated.cells)
    assert len(runs) == sum(times.values())
    rounds = [c.repeat for c in runs]
    assert rounds == sorted(rounds)  # all cells once, then again: repeats spread over the sweep
    assert len({c.instance for c in runs}) == len(runs)
    assert {c.instance for c in runs if c.id == runs[0].id} == {f"{runs[0].id}-r{k}" for k in (1, 2, 3)}


def test_repeats_integer_and_defaults() -> None:
    raw = base_raw()
    (cell,) = parse(raw).cells
    assert (cell.repeats, cell.repeat, cell.instance, cell.lake_repeat) == (1, 1, BASE_CELL_ID, None)
    raw["repeats"] = 4
    (cell,) = parse(raw).cells
    assert (cell.id, cell.repeats) == (BASE_CELL_ID, 4)


@pytest.mark.parametrize(
    ("repeats", "message"),
    [
        (0, "repeats: 0 — Input should be greater than or equal to 1"),
        ([{"when": {"workload.size": 1}, "times": 2}], "repeats[0].when.workload.size: not an axis of this matrix"),
        ([{"times": 0}], "repeats[0].times: 0 — Input should be greater than or equal to 1"),
        ("often", "repeats: 'often' — Input should be a valid integer"),
    ],
)
def test_bad_repeats_name_the_field(repeats: Any, message: str) -> None:
    raw = base_raw()
    raw["repeats"] = repeats
    with pytest.raises(MatrixError) as err:
        parse(raw)
    assert message in str(err.value)


def test_redis_version_matrix_pairs_each_cell_across_7_0_and_6_2() -> None:
    from bench_tasks.cell.runner import select_cells

    cells = select_cells(load_matrix(REPO / "matrices" / "redis-versions.yaml"))
    by_series: dict[str, set[str]] = {}
    for cell in cells:
        by_series.setdefault(cell.series_key, set()).add(cell.spec.version)
    assert len(by_series) == 5
    assert all(versions == {"7.0.15", "6.2.14"} for versions in by_series.values())


def test_redis_seed_matrix_has_seed_000s_five_shapes_for_redis_and_nats() -> None:
    cells = [c.spec for c in load_matrix(REPO / "matrices" / "redis-seed000.yaml").cells]
    shapes = {(256, 3000, 10), (1024, 3000, 10), (5120, 2000, 10), (1024, 20000, 25), (1048576, 100, 2)}
    for name in ("redis", "nats"):
        mine = [c for c in cells if c.system == name]
        assert {c.measurement for c in mine} == {"rtt"}
        w = [c.workload for c in mine]
        assert {(x.message_size_bytes, int(x.rate_per_s), x.connections) for x in w} == shapes
        assert {x.measure_s for x in w} == {30}
