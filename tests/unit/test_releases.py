"""Release lists, lines, ranges and `latest` (bench_tasks/releases): release order, what can be assembled, the
cache matrices validate against, and what a run does when the registry cannot be reached."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_tasks.errors import BrokerError, MatrixError
from bench_tasks.releases import Release, ReleaseList, cached, current, newest_first, refresh, release_problem
from bench_tasks.releases.order import matches
from bench_tasks.spec.matrix import parse_matrix

LISTED = [
    Release("4.4.0", "Maven Central", missing="kafka-tools-api 4.4.0 is not on Maven Central"),
    Release("4.3.2", "Maven Central"),
    Release("4.3.1", "Maven Central"),
    Release("4.10.0-rc1", "Maven Central"),
    Release("3.9.2", "Maven Central"),
    Release("3.7.0", "Maven Central"),
    Release("3.6.2", "Maven Central"),
    Release("3.6.1", "Maven Central"),
    Release("3.5.0", "Maven Central"),
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    yield tmp_path / "cache"


def listed() -> ReleaseList:
    return ReleaseList("kafka", LISTED, "2026-12-06T00:00:00+00:00")


def test_release_order_is_the_registrys_numbering() -> None:
    assert newest_first(["4.9.2", "4.10.0", "4.10.0rc1", "3.9.2"]) == ["4.10.0", "4.10.0rc1", "4.9.2", "3.9.2"]
    assert matches("4.3.x", "4.3.2") and matches("4.x", "4.10.0") and not matches("4.3.x", "4.30.0")


def test_latest_and_a_line_choose_the_newest_stable_release_that_can_be_assembled() -> None:
    releases = listed()
    assert releases.resolve("latest") == "4.3.2"  # not 4.4.0 (missing a jar), not a release candidate
    assert releases.resolve("3.6.x") == "3.6.2" and releases.resolve("3.x") == "3.9.2"
    assert releases.resolve("3.6.1") == "3.6.1"


def test_what_cannot_be_named_says_why() -> None:
    releases = listed()
    assert "cannot be assembled: kafka-tools-api 4.4.0 is not on Maven Central" in (releases.problem("4.4.0") or "")
    assert "unknown kafka version" in (releases.problem("9.9.9") or "")
    assert "no release of kafka 2.x can be assembled" in (releases.problem("2.x") or "")
    with pytest.raises(BrokerError, match="cannot be assembled"):
        releases.resolve("4.4.0")


def test_a_range_expands_in_release_order() -> None:
    releases = listed()
    assert releases.expand("3.6") == ["3.6.2", "3.7.0", "3.9.2", "4.3.2"]  # each minor's newest patch
    assert releases.expand("3.6", "3.7", "patch") == ["3.6.1", "3.6.2", "3.7.0"]
    assert releases.expand("3.6.2", "4.3") == ["3.6.2", "3.7.0", "3.9.2", "4.3.2"]
    with pytest.raises(BrokerError, match=r"no release of kafka from 5\.0"):
        releases.expand("5.0")


def test_validation_reads_the_cache_only(cache: Path) -> None:
    assert release_problem("kafka", "4.3.2") is None  # nothing cached: a version is taken on its word
    assert "neither a release" in (release_problem("kafka", "four") or "")
    refresh("kafka", lambda: LISTED)
    assert json.loads((cache / "releases" / "kafka.json").read_text())["releases"][0]["version"] == "4.10.0-rc1"
    assert release_problem("kafka", "4.3.2") is None and "unknown kafka version" in (release_problem("kafka", "4.0.0"))


def test_a_run_uses_the_cache_when_the_registry_cannot_be_reached(cache: Path) -> None:
    def unreachable() -> list[Release]:
        raise OSError("Name or service not known")

    with pytest.raises(BrokerError, match="none are cached"):
        current("kafka", unreachable)
    refresh("kafka", lambda: LISTED)
    assert current("kafka", unreachable).offline is None  # fresh enough: the registry is not asked
    used = current("kafka", unreachable, max_age_s=0)
    assert used.resolve("latest") == "4.3.2" and "could not be reached" in (used.offline or "")
    newer = [Release("4.3.3", "Maven Central"), *LISTED]
    assert current("kafka", lambda: newer, max_age_s=0).resolve("latest") == "4.3.3"  # the night it appears
    assert cached("kafka") is not None and cached("kafka").resolve("latest") == "4.3.3"  # type: ignore[union-attr]


def nats_matrix(versions: object) -> dict:
    return {
        "name": "ranges",
        "systems": [{"system": "nats", "versions": versions, "broker": {"mode": "core"}}],
        "workload": {"message_size_bytes": 256, "rate_per_s": 100, "measure_s": 1},
        "measurements": ["e2e"],
    }


def test_a_matrix_range_becomes_one_cell_per_release(cache: Path) -> None:
    nats = [Release(v, "PyPI") for v in ("2.12.8", "2.12.7", "2.11.1", "2.10.29", "2.10.3", "2.9.25")]
    with pytest.raises(MatrixError, match=r"a range needs the list of nats releases; run 'sixnines brokers fetch"):
        parse_matrix(nats_matrix({"from": "2.10"}), "ranges")
    refresh("nats", lambda: nats)
    cells = parse_matrix(nats_matrix({"from": "2.10", "to": "latest", "every": "minor"}), "ranges").cells
    assert [c.spec.version for c in cells] == ["2.10.29", "2.11.1", "2.12.8"]
    mixed = parse_matrix(nats_matrix([{"from": "2.12", "every": "patch"}, "2.9.x", "2.12.8"]), "ranges").cells
    assert [c.spec.version for c in mixed] == ["2.12.7", "2.12.8", "2.9.x"]
    with pytest.raises(MatrixError, match=r"versions\[0\]: no release of nats from 3.0"):
        parse_matrix(nats_matrix([{"from": "3.0"}]), "ranges")
