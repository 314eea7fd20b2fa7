"""The session summary's lease line (tests/lease_usage.py) counts what the lease file says while it says it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.lease_usage import LeaseUsage


def test_time_is_counted_per_holder_and_cells_by_their_work_folder(tmp_path: Path) -> None:
    lease = tmp_path / "host.lease"
    usage = LeaseUsage(lease).start()
    lease.write_text(json.dumps({"work": "/w/a", "cell": "a"}))
    time.sleep(0.4)
    lease.write_text(json.dumps({"analyses": [{"run": "r"}]}))
    time.sleep(0.3)
    lease.unlink()
    time.sleep(0.3)
    line = usage.line()
    assert usage.cells == {"/w/a"} and usage.cells_s >= 0.25 and usage.analyses_s >= 0.15
    assert usage.cells_s + usage.analyses_s <= time.monotonic() - usage.started - 0.25  # not while it was free
    assert "by 1 cell(s)" in line
