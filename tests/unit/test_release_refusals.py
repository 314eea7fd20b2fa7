"""What a release lacks, refused when the matrix is parsed and named: JetStream before nats-server 2.2.0, a NATS
cluster before /healthz, streams before Redis 5.0, and a release that cannot be assembled here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from bench_tasks.errors import MatrixError
from bench_tasks.releases import Release
from bench_tasks.spec.features import predates
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.systems import system
from bench_tasks.systems.nats.settings import NatsCell
from bench_tasks.systems.redis.settings import RedisCell
from bench_tasks.systems.valkey.settings import ValkeyCell
from tests.recorded_releases import recorded

WORKLOAD = {"message_size_bytes": 64, "rate_per_s": 10, "warmup_s": 0.5, "measure_s": 1}


@pytest.fixture(autouse=True)
def listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Release lists as the registries answered them (a few releases each)."""
    recorded(monkeypatch, tmp_path, "nats", ["2.1.2", "2.6.1", "2.7.3", "2.15.3"])
    recorded(monkeypatch, tmp_path, "redis", ["3.2.9", "5.0.6", "7.0.15"])
    recorded(monkeypatch, tmp_path, "valkey", ["8.1.8"])


def spec(model: type, system_name: str, version: str, measurement: str, **broker: Any) -> Any:
    raw = {"system": system_name, "version": version, "workload": WORKLOAD, "measurement": measurement}
    return model.model_validate(raw | {"broker": broker})


def test_a_jetstream_cell_on_a_release_before_jetstream_is_refused_naming_it() -> None:
    for version in ("2.1.2", "2.1.x"):
        with pytest.raises(ValidationError, match=rf"nats-server {version} predates JetStream \(first in 2\.2\.0\)"):
            spec(NatsCell, "nats", version, "publish", mode="jetstream")
    assert spec(NatsCell, "nats", "2.1.2", "e2e", mode="core").version == "2.1.2"  # core NATS runs there
    assert spec(NatsCell, "nats", "2.x", "publish", mode="jetstream").version == "2.x"  # resolves to a later one


def test_a_cluster_on_a_release_without_healthz_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"broker.servers 3: nats-server 2\.6\.1 has no /healthz"):
        spec(NatsCell, "nats", "2.6.1", "publish", mode="jetstream", servers=3, replicas=3)


def test_a_streams_cell_on_a_redis_before_streams_is_refused_and_valkey_has_them() -> None:
    for version in ("3.2.9", "3.x"):
        with pytest.raises(ValidationError, match=rf"redis {version} predates streams \(first in 5\.0\.0\)"):
            spec(RedisCell, "redis", version, "publish", mode="streams")
    assert spec(RedisCell, "redis", "3.2.9", "rtt", mode="pubsub").version == "3.2.9"
    assert spec(RedisCell, "redis", "5.0.6", "publish", mode="streams").broker.mode == "streams"
    valkey = spec(ValkeyCell, "valkey", "8.1.8", "publish", mode="streams")
    assert system("valkey").label(valkey) == "valkey/streams maxlen~100000"


def test_the_first_release_of_a_feature_is_told_apart_by_release_order() -> None:
    assert predates("2.1.2", "2.2.0") and not predates("2.2.0", "2.2.0") and not predates("2.10.7", "2.2.0")
    assert predates("2.1.x", "2.2.0") and not predates("2.2.x", "2.2.0") and not predates("2.x", "2.2.0")
    assert not predates("latest", "2.2.0") and predates("2.2.0-RC.1", "2.2.0")


def test_a_release_that_cannot_be_assembled_is_refused_with_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: None
) -> None:
    recorded(
        monkeypatch,
        tmp_path,
        "stan",
        [Release("0.25.6", "proxy"), Release("0.16.2", "proxy", missing="it does not build with go1.26.8 (x)")],
    )
    raw = {
        "name": "old",
        "systems": [{"system": "stan", "versions": ["0.16.2"]}],
        "workload": WORKLOAD,
        "measurements": ["e2e"],
    }
    with pytest.raises(MatrixError, match=r"stan 0\.16\.2 cannot be assembled: it does not build with go1\.26\.8"):
        parse_matrix(raw, "old.yaml")
