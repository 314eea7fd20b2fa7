"""How long a test session held the host lease, said at its end: what bounds `make test`'s cell part.

The cell part's workers take turns on the host lease (`bench_tasks.cell.hostlease`), so that part lasts at least
the time its cells and local analyses hold it, however many workers it has; what it lasts beyond that is work
outside the lease (brokers and Spark sessions starting, Airflow, installs) that no worker overlapped. The
session's controller looks at the lease file every 50 ms and sums what it saw: time held by cells (how many, and
per system their states record), time held by analyses, and the session's wall time beside them. Each process
that runs tests also sums, per test, the time that cells and analyses its own process tree took held the lease
(`LeaseClockPerTest`): the tests to make cheaper first, listed at the session's end.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

POLL_S = 0.05


@dataclass
class LeaseUsage:
    """A background watch of one lease file."""

    path: Path
    cells_s: float = 0.0
    analyses_s: float = 0.0
    cells: set[str] = field(default_factory=set)
    by_system: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    _systems: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LeaseUsage:
        _watch(self.path, self._stop, self.count, "lease-usage")
        return self

    def count(self, holder: dict | None, seconds: float) -> None:
        """Charge `seconds` to what the lease said (`holder`, None: free)."""
        if holder is None:
            return
        if "analyses" in holder:
            self.analyses_s += seconds
        elif "work" in holder:
            self.cells_s += seconds
            self.cells.add(str(holder["work"]))
            self.by_system[self._system_of(str(holder["work"]))] += seconds

    def _system_of(self, work: str) -> str:
        """The system of the cell whose work folder is `work`, from its recorded state once written (a holder
        without one, a test holding the host for cells of its own, is "no cell record")."""
        known = self._systems.get(work)
        if known is None:
            state = read_lease(Path(work) / "state.json") or {}
            known = ((state.get("cell") or {}).get("spec") or {}).get("system")
            if known is None:
                return "no cell record"
            self._systems[work] = known
        return known

    def line(self) -> str:
        """One line for the session's summary."""
        self._stop.set()
        wall = time.monotonic() - self.started
        held = self.cells_s + self.analyses_s
        cells = Counter(self._systems.values())
        systems = ", ".join(
            f"{name} {seconds:.0f} s" + (f" ({cells[name]} cell(s))" if cells[name] else "")
            for name, seconds in self.by_system.most_common()
        )
        return (
            f"host lease held {held:.0f} s of the session's {wall:.0f} s ({held / wall:.0%}): "
            f"{self.cells_s:.0f} s by {len(self.cells)} cell(s), {self.analyses_s:.0f} s by analyses"
            + (f"\n  by the cells' system: {systems}" if systems else "")
        )


@dataclass
class LeaseClockPerTest:
    """In a process that runs tests: per test, how long cells and analyses taken by this process or one it started
    held the lease. Whose a holder is, is judged once per holder (a process tree is walked only then)."""

    path: Path
    current: str | None = None
    held: Counter[str] = field(default_factory=Counter)
    _judged: dict[tuple[Any, ...], bool] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LeaseClockPerTest:
        _watch(self.path, self._stop, self.count, "test-lease-clock")
        return self

    def stop(self) -> dict[str, float]:
        """Stop watching; the seconds held per test id."""
        self._stop.set()
        return {test: round(seconds, 1) for test, seconds in self.held.items()}

    def count(self, holder: dict | None, seconds: float) -> None:
        """Charge `seconds` to the running test if the lease said (`holder`) this process tree holds it."""
        test = self.current
        if test is not None and self._ours(holder):
            self.held[test] += seconds

    def _ours(self, holder: dict | None) -> bool:
        if holder is None:
            return False
        takers = [entry.get("taker") for entry in holder.get("analyses", [holder])]
        key = tuple(json.dumps(taker, sort_keys=True) for taker in takers)
        if key not in self._judged:
            self._judged.clear()
            self._judged[key] = any(_started_here(taker) for taker in takers)
        return self._judged[key]


def _watch(path: Path, stop: threading.Event, count: Callable[[dict | None, float], None], name: str) -> None:
    """A thread that reads the lease every POLL_S until `stop` is set, handing `count` what it said and the seconds
    since the last look."""

    def loop() -> None:
        last = time.monotonic()
        while not stop.wait(POLL_S):
            now = time.monotonic()
            count(read_lease(path), now - last)
            last = now

    threading.Thread(target=loop, name=name, daemon=True).start()


def read_lease(path: Path) -> dict | None:
    """What the lease file says, read without its lock (None: no lease, or one being replaced)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # no lease, or one being replaced
        return None


def _started_here(taker: dict | None) -> bool:
    """The taker is this process or one of its descendants."""
    if not taker:
        return False
    try:
        process = psutil.Process(taker["pid"])
        return process.pid == os.getpid() or any(parent.pid == os.getpid() for parent in process.parents())
    except psutil.Error:
        return False


def top_holders(held: dict[str, float], count: int = 15) -> list[str]:
    """The lines of the tests that held the lease longest, longest first."""
    ranked = sorted(held.items(), key=lambda item: -item[1])[:count]
    return [f"{seconds:7.1f}s lease  {test}" for test, seconds in ranked if seconds > 0]
