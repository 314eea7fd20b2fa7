"""The host lease without brokers: a holder this checkout cannot judge keeps the host."""

from __future__ import annotations

import json
from pathlib import Path

import psutil
import pytest

from bench_tasks.cell.lifecycle import CellWork, HostBusy, acquire_host, release_host


def test_a_holder_of_a_system_this_checkout_lacks_keeps_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checkouts share one cache (and so one lease); a cell of a system only the other one has must not
    crash this one's provisioning, nor be taken over while its nodes run (asked by PID and process name)."""
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    other = CellWork(tmp_path / "other")
    other.root.mkdir()
    me = psutil.Process()  # this test's own process plays the other checkout's running node
    node, name = {"1": me.pid}, " ".join(me.cmdline())
    brokers = {"system": "some-future-system", "nodes": node, "process_name": name, "address": "127.0.0.1:1"}
    other.state.write_text(json.dumps({"brokers": brokers}))
    (tmp_path / "cache" / "host.lease").write_text(json.dumps({"work": str(other.root), "cell": "x", "since": "now"}))
    mine = CellWork(tmp_path / "mine")
    with pytest.raises(HostBusy, match="busy with cell x"):
        acquire_host(mine)
    brokers["nodes"] = {"1": 2**22 + 1}  # its node gone (a PID above Linux's maximum): stale, taken over
    other.state.write_text(json.dumps({"brokers": brokers}))
    acquire_host(mine)
    release_host(mine)
    assert not (tmp_path / "cache" / "host.lease").exists()
