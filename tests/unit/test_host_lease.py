"""The host lease without brokers: a holder this checkout cannot judge keeps the host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_tasks.cell.lifecycle import CellWork, HostBusy, acquire_host, release_host


def test_a_holder_of_a_system_this_checkout_lacks_keeps_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checkouts share one cache (and so one lease); a cell of a system only the other one has must not
    crash this one's provisioning, nor be taken over as stale: it may well be running."""
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    other = CellWork(tmp_path / "other")
    other.root.mkdir()
    brokers = {"system": "some-future-system", "nodes": {"1": 1}, "address": "127.0.0.1:1"}
    other.state.write_text(json.dumps({"brokers": brokers}))
    (tmp_path / "cache" / "host.lease").write_text(json.dumps({"work": str(other.root), "cell": "x", "since": "now"}))
    mine = CellWork(tmp_path / "mine")
    with pytest.raises(HostBusy, match="busy with cell x"):
        acquire_host(mine)
    (other.root / "teardown.json").write_text("{}")  # torn down: now stale, and taken over
    acquire_host(mine)
    release_host(mine)
    assert not (tmp_path / "cache" / "host.lease").exists()
