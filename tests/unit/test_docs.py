"""Every example in the README and docs/ is checked here, so the text cannot drift from the code."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench_tasks.cell.runner import resolve_cells
from bench_tasks.spec.matrix import load_matrix, parse_matrix

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()
MATRIX_DOC = (REPO / "docs" / "matrix.md").read_text()
EXTERNAL_DOC = (REPO / "docs" / "external-brokers.md").read_text()


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def block_with(text: str, language: str, marker: str) -> str:
    (found,) = [b for b in blocks(text, language) if marker in b]
    return found


def every_key_example() -> dict:
    return yaml.safe_load(blocks(MATRIX_DOC, "yaml")[0])


def test_readme_opens_with_the_two_commands_and_stays_short() -> None:
    first = blocks(README, "sh")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make bench", "make test"]
    assert README.index("make bench") < README.index("## ")
    assert len(README.splitlines()) <= 150
    assert "make test-fast" in README and "make lock" in README


def test_readme_first_matrix_is_valid_and_marks_the_required_keys() -> None:
    example = block_with(README, "yaml", "first_matrix")
    cells = resolve_cells(parse_matrix(yaml.safe_load(example), "README.md"))
    assert len(cells) == 4  # 2 measurements × 2 sizes, as the text says
    marked = {line.split(":")[0].strip(" -") for line in example.splitlines() if "# required" in line}
    required = {"name", "systems", "system", "versions", "workload", "message_size_bytes", "rate_per_s"}
    assert marked == required | {"measure_s", "measurements"}


def test_readme_own_broker_fragment_and_connections() -> None:
    from bench_tasks.brokers.connections import parse_connection
    from bench_tasks.systems.kafka.access import kafka_access
    from bench_tasks.systems.nats.access import nats_access

    raw = yaml.safe_load(block_with(README, "yaml", "first_matrix"))
    raw["systems"] = yaml.safe_load(block_with(README, "yaml", "brokers: external"))["systems"]
    raw["measurements"], raw["axes"] = ["e2e"], {}
    cells = resolve_cells(parse_matrix(raw, "README.md"))
    assert sorted((c.spec.system, c.spec.connection, c.spec.version) for c in cells) == [
        ("kafka", "my_kafka", "external"),
        ("nats", "my_nats", "external"),
    ]
    exports = [shlex.split(line)[1] for line in block_with(README, "sh", "AIRFLOW_CONN_").splitlines()]
    conns = dict(e.split("=", 1) for e in exports)
    kafka = parse_connection("my_kafka", conns["AIRFLOW_CONN_MY_KAFKA"])
    nats = parse_connection("my_nats", conns["AIRFLOW_CONN_MY_NATS"])
    assert kafka_access(kafka).address == "kafka-1.example.net:9092"
    assert nats_access(nats).address == "nats://nats-1.example.net:4222" and nats_access(nats).client["user"] == "bench"


def test_readme_lists_every_shipped_matrix() -> None:
    listed = re.findall(r"^\| `([\w-]+\.yaml)` \|", README, flags=re.M)
    assert sorted(listed) == sorted(p.name for p in (REPO / "matrices").glob("*.yaml"))


def test_readme_commands_exist() -> None:
    commands = re.findall(r"^\| `sixnines (\w+)", README, flags=re.M)
    assert {"run", "cells", "runs", "analyze", "calibrate", "brokers"} <= set(commands)
    for command in [*commands, "report", "regressions"]:
        done = subprocess.run([sys.executable, "-m", "bench_tasks", command, "-h"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr


def test_readme_links_resolve() -> None:
    for target in re.findall(r"\]\((docs/[\w.-]+\.md)\)", README):
        assert (REPO / target).is_file(), target


def test_every_key_example_is_valid_and_shows_every_key() -> None:
    from bench_tasks.spec.cell import Workload
    from bench_tasks.spec.matrix_model import MatrixFile, SystemBlock
    from bench_tasks.systems.nats.settings import NatsBroker, NatsClient

    example = blocks(MATRIX_DOC, "yaml")[0]
    matrix = parse_matrix(yaml.safe_load(example), "docs/matrix.md")
    # 2 versions × 2 modes × 2 measurements × 2 rates, minus jetstream+rtt (2 × 2 × 2)
    assert len(matrix.cells) == len(resolve_cells(matrix)) == 16 - 4
    assert {c.spec.measurement for c in matrix.cells} == {"e2e", "rtt"}
    shown = set(re.findall(r"^\s*(?:- )?(\w+):", example, flags=re.M))
    for model in (MatrixFile, SystemBlock, Workload, NatsBroker, NatsClient):
        missing = set(model.model_fields) - shown - {"connection"}  # connection: external brokers' page
        assert not missing, f"{model.__name__}: {sorted(missing)} not shown in docs/matrix.md"


def test_error_example_is_what_the_cli_prints(tmp_path: Path) -> None:
    raw = every_key_example()
    raw["systems"][0]["versions"] = ["9.9.9"]
    raw["axes"]["workload.rate_per_s"] = [1000, -1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "bench_tasks", "cells", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    shown = [line for line in blocks(MATRIX_DOC, "text")[0].splitlines() if line.strip().startswith("- ")]
    for line in shown:
        expected = line.strip().split("…")[0].replace("bad.yaml", str(bad))
        assert expected in done.stderr, f"docs show {expected!r}; CLI printed {done.stderr!r}"


def test_kafka_fragment_is_valid_with_the_main_example() -> None:
    raw = every_key_example()
    raw["systems"] = yaml.safe_load(block_with(MATRIX_DOC, "yaml", "matrices/kafka_durability.yaml"))["systems"]
    raw["axes"] = {"client.producer.linger.ms": [0, 5, 20]}  # the axis the text shows
    raw["measurements"], raw["exclude"] = ["e2e"], []
    cells = resolve_cells(parse_matrix(raw, "docs/matrix.md"))
    assert sorted(c.spec.client.producer["linger.ms"] for c in cells) == [0, 5, 20]
    assert all(c.spec.broker.replication_factor == 3 and c.spec.client.producer["acks"] == "all" for c in cells)


def test_chain_and_background_fragment_is_valid_with_the_main_example() -> None:
    raw = every_key_example()
    fragment = yaml.safe_load(block_with(MATRIX_DOC, "yaml", "background producers"))
    raw["systems"], raw["measurements"] = fragment["systems"], fragment["measurements"]
    raw["workload"]["relays"] = fragment["workload"]["relays"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "docs/matrix.md"))
    assert len(cells) == 2 * 2  # measurements × background producers axis
    assert {c.spec.measurement for c in cells} == {"e2e", "chain"}
    assert {c.spec.background["traffic"].producers for c in cells} == {0, 300}


def test_nats_cluster_fragment_is_valid_with_the_main_example() -> None:
    raw = every_key_example()
    fragment = yaml.safe_load(block_with(MATRIX_DOC, "yaml", "matrices/nats_r3.yaml"))
    raw["systems"], raw["measurements"] = fragment["systems"], fragment["measurements"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "docs/matrix.md"))
    assert sorted((c.spec.broker.servers, c.spec.broker.replicas, c.spec.measurement) for c in cells) == [
        (1, 1, "e2e"),
        (1, 1, "publish"),
        (3, 3, "e2e"),
        (3, 3, "publish"),
    ]


def test_faults_fragment_is_valid_with_the_main_example() -> None:
    raw = every_key_example()
    fragment = yaml.safe_load(block_with(MATRIX_DOC, "yaml", "Faults on the measure phase's clock"))
    raw["systems"][0]["broker"] = {"mode": "jetstream", "servers": 3, "replicas": 3}
    raw["systems"][0]["axes"], raw["workload"]["measure_s"] = {}, 30
    raw["faults"], raw["axes"], raw["exclude"], raw["measurements"] = fragment["faults"], fragment["axes"], [], ["e2e"]
    cells = resolve_cells(parse_matrix(raw, "docs/matrix.md"))
    assert {len(c.spec.faults) for c in cells} == {0, 1}  # the axis replaces the top-level faults
    assert any(c.label.endswith("fault:stall@10s/random 3s") for c in cells)


def test_external_fragment_is_valid_with_the_main_example() -> None:
    raw = every_key_example()
    fragment = yaml.safe_load(block_with(EXTERNAL_DOC, "yaml", "# matrices/external.yaml (abridged)"))
    raw["systems"], raw["measurements"] = fragment["systems"], fragment["measurements"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "docs/external-brokers.md"))
    assert sorted((c.spec.system, str(c.spec.client.security) if c.spec.system == "kafka" else "") for c in cells) == [
        ("kafka", "plaintext"),
        ("kafka", "sasl_ssl"),
        ("kafka", "ssl"),
        ("nats", ""),
    ]
    assert {c.spec.version for c in cells} == {"external"}


def test_connection_example_gives_the_documented_client_settings() -> None:
    from bench_tasks.brokers.connections import parse_connection
    from bench_tasks.systems.kafka.access import kafka_access

    conn = parse_connection("sixnines_kafka_external", block_with(EXTERNAL_DOC, "json", '"conn_type": "kafka"'))
    sasl = kafka_access(conn)
    assert sasl.address == "kafka-1:9094" and sasl.client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert sasl.client["ssl.ca.location"] == "/etc/kafka/ca.pem" and sasl.client["sasl.username"] == "bench"
    assert kafka_access(conn, security="ssl").address == "kafka-1:9093,kafka-2:9093"


@pytest.mark.parametrize("path", sorted((REPO / "matrices").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_matrices_are_valid(path: Path) -> None:
    matrix = load_matrix(path)
    assert matrix.cells and matrix.schedule
    assert len({c.id for c in matrix.cells}) == len(matrix.cells)


def test_docs_link_to_pages_that_exist() -> None:
    for page in (REPO / "docs").glob("*.md"):
        for target in re.findall(r"\]\(([\w.-]+\.md)\)", page.read_text()):
            assert (REPO / "docs" / target).is_file(), f"{page.name} links to {target}"
