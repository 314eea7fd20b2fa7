"""How long a test session held the host lease, said at its end: what bounds `make test`'s cell part.

The cell part's workers take turns on the host lease (`bench_tasks.cell.hostlease`), so that part lasts at least
the time its cells and local analyses hold it, however many workers it has; what it lasts beyond that is work
outside the lease (brokers and Spark sessions starting, Airflow, installs) that no worker overlapped. The
session's controller looks at the lease file every 50 ms and sums what it saw: time held by cells (and how many
cells), time held by analyses, and the session's wall time beside them.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

POLL_S = 0.05


@dataclass
class LeaseUsage:
    """A background watch of one lease file."""

    path: Path
    cells_s: float = 0.0
    analyses_s: float = 0.0
    cells: set[str] = field(default_factory=set)
    started: float = field(default_factory=time.monotonic)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LeaseUsage:
        threading.Thread(target=self._watch, name="lease-usage", daemon=True).start()
        return self

    def _watch(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(POLL_S):
            now = time.monotonic()
            self._count(self._holder(), now - last)
            last = now

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):  # no lease, or one being replaced
            return None

    def _count(self, holder: dict | None, seconds: float) -> None:
        if holder is None:
            return
        if "analyses" in holder:
            self.analyses_s += seconds
        elif "work" in holder:
            self.cells_s += seconds
            self.cells.add(str(holder["work"]))

    def line(self) -> str:
        """One line for the session's summary."""
        self._stop.set()
        wall = time.monotonic() - self.started
        held = self.cells_s + self.analyses_s
        return (
            f"host lease held {held:.0f} s of the session's {wall:.0f} s ({held / wall:.0%}): "
            f"{self.cells_s:.0f} s by {len(self.cells)} cell(s), {self.analyses_s:.0f} s by analyses"
        )
