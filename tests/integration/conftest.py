"""Integration tests talk to a real nats-server on 127.0.0.1; they are marked so `-m "not integration"`
gives a quick unit run. Fault tests of three-node Kafka clusters ask for `kafka_first_tier`."""

from __future__ import annotations

import pytest

from .helpers import FIRST_TIER_ONLY


@pytest.fixture
def kafka_first_tier(monkeypatch: pytest.MonkeyPatch) -> tuple[str, ...]:
    """Kafka nodes this test starts run with FIRST_TIER_ONLY (kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS): for
    fault tests of three-node clusters, which judge recovery, not throughput."""
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", " ".join(FIRST_TIER_ONLY))
    return FIRST_TIER_ONLY


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "/integration/" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
