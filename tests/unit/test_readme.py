"""Every example in the README is executed here, so the README cannot drift from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench_tasks.matrix import load_matrix, parse_matrix
from bench_tasks.runner import resolve_cells

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_two_commands() -> None:
    first = blocks("sh")[0].splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make bench", "make test"]
    assert README.index("make bench") < README.index("## ")


def test_matrix_example_is_valid_and_expands_as_described() -> None:
    example = blocks("yaml")[0]
    matrix = parse_matrix(yaml.safe_load(example), "README.md")
    # 2 versions × 2 modes × 2 measurements × 2 rates, minus jetstream+rtt (2 × 2 × 2)
    assert len(matrix.cells) == 16 - 4
    assert len(resolve_cells(matrix)) == 12
    assert {c.spec.measurement for c in matrix.cells} == {"e2e", "rtt"}


def test_error_example_is_what_the_cli_prints(tmp_path: Path) -> None:
    example = blocks("yaml")[0]
    raw = yaml.safe_load(example)
    raw["systems"][0]["versions"] = ["9.9.9"]
    raw["axes"]["workload.rate_per_s"] = [1000, -1]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    done = subprocess.run([sys.executable, "-m", "bench_tasks", "cells", str(bad)], capture_output=True, text=True)
    assert done.returncode == 2
    shown = [line for line in blocks("text")[0].splitlines() if line.strip().startswith("- ")]
    for line in shown:
        expected = line.strip().split("…")[0].replace("bad.yaml", str(bad))
        assert expected in done.stderr, f"README shows {expected!r}; CLI printed {done.stderr!r}"


def test_kafka_fragment_is_valid_with_the_main_example() -> None:
    raw = yaml.safe_load(blocks("yaml")[0])
    raw["systems"] = yaml.safe_load(blocks("yaml")[2])["systems"]
    raw["axes"] = {"client.producer.linger.ms": [0, 5, 20]}  # the axis the README shows
    raw["measurements"] = ["e2e"]
    raw["exclude"] = []
    cells = resolve_cells(parse_matrix(raw, "README.md"))
    assert len(cells) == 3
    assert sorted(c.spec.client.producer["linger.ms"] for c in cells) == [0, 5, 20]
    assert all(c.spec.broker.replication_factor == 3 and c.spec.client.producer["acks"] == "all" for c in cells)


@pytest.mark.parametrize("path", sorted((REPO / "matrices").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_matrices_are_valid(path: Path) -> None:
    matrix = load_matrix(path)
    assert matrix.cells and matrix.schedule
    assert len({c.id for c in matrix.cells}) == len(matrix.cells)


@pytest.mark.parametrize("command", [["run"], ["cells"], ["calibrate"], ["brokers", "up"], ["brokers", "fetch"]])
def test_documented_commands_exist(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "bench_tasks", *command, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_chain_and_background_fragment_is_valid_with_the_main_example() -> None:
    raw = yaml.safe_load(blocks("yaml")[0])
    fragment = yaml.safe_load(blocks("yaml")[1])
    raw["systems"] = fragment["systems"]
    raw["measurements"] = fragment["measurements"]
    raw["workload"]["relays"] = fragment["workload"]["relays"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "README.md"))
    assert len(cells) == 2 * 2  # measurements × background producers axis
    assert {c.spec.measurement for c in cells} == {"e2e", "chain"}
    assert {c.spec.background["traffic"].producers for c in cells} == {0, 300}


def test_nats_cluster_fragment_is_valid_with_the_main_example() -> None:
    raw = yaml.safe_load(blocks("yaml")[0])
    fragment = yaml.safe_load(blocks("yaml")[3])
    raw["systems"], raw["measurements"] = fragment["systems"], fragment["measurements"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "README.md"))
    assert sorted((c.spec.broker.servers, c.spec.broker.replicas, c.spec.measurement) for c in cells) == [
        (1, 1, "e2e"),
        (1, 1, "publish"),
        (3, 3, "e2e"),
        (3, 3, "publish"),
    ]


def _block_with(language: str, marker: str) -> str:
    (found,) = [b for b in blocks(language) if marker in b]
    return found


def test_external_fragment_is_valid_with_the_main_example() -> None:
    raw = yaml.safe_load(blocks("yaml")[0])
    fragment = yaml.safe_load(_block_with("yaml", "# matrices/external.yaml (abridged)"))
    raw["systems"], raw["measurements"] = fragment["systems"], fragment["measurements"]
    raw["axes"], raw["exclude"] = {}, []
    cells = resolve_cells(parse_matrix(raw, "README.md"))
    assert sorted((c.spec.system, str(c.spec.client.security) if c.spec.system == "kafka" else "") for c in cells) == [
        ("kafka", "plaintext"),
        ("kafka", "sasl_ssl"),
        ("kafka", "ssl"),
        ("nats", ""),
    ]
    assert {c.spec.version for c in cells} == {"external"}


def test_connection_example_gives_the_documented_client_settings() -> None:
    from bench_tasks.connections import kafka_access, parse_connection

    conn = parse_connection("sixnines_kafka_external", _block_with("json", '"conn_type": "kafka"'))
    sasl = kafka_access(conn)
    assert sasl.address == "kafka-1:9094" and sasl.client["sasl.mechanism"] == "SCRAM-SHA-512"
    assert sasl.client["ssl.ca.location"] == "/etc/kafka/ca.pem" and sasl.client["sasl.username"] == "bench"
    assert kafka_access(conn, security="ssl").address == "kafka-1:9093,kafka-2:9093"
