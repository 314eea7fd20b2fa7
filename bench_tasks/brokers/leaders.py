"""Who leads each partition (or stream) of a cell's measured route, watched for the whole cell.

Leaders are polled from a thread (a stalled broker must not stall the cell's monitor loop), inside the brokers'
network namespace when they run in one; every change lands with the results so each received sample can be
attributed to the node that led its partition when it arrived, and faults aimed at "the leader" hit that node.
A poll that fails (a stalled or dead broker, an election timing out) is counted and recorded with the cell
(`poll_errors`); the log gets the first failure of each run of failures and the recovery, not one line per poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from ..topology.netns import enter

# partition -> leader node, as the cluster says now (a partition left out has no known leader: an election)
LeaderPoll = Callable[[], Mapping[int, int]]
_log = logging.getLogger(__name__)


class LeaderWatch:
    """Each partition's leader now and at every change, polled from a thread every 250 ms (a stalled broker
    must not stall the cell's monitor loop). `poll` returns partition → leader node as the cluster says now
    (a partition it leaves out has no known leader: an election; nothing is recorded until one is known).
    The thread enters `netns` first (brokers in a network namespace answer only there). The process that
    watches must live for the whole cell: the CLI runner, or the detached generator when Airflow runs it."""

    def __init__(self, poll: Callable[[], Mapping[int, int]], netns: str = ""):
        self.poll = poll
        self.netns = netns
        self._changes: list[dict[str, int]] = []
        self._errors = 0
        self._last_error: str | None = None
        self._failing = 0  # failed polls in a row, for the log
        self._stop = threading.Event()
        self._known = threading.Event()  # a poll has named a leader
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        def watch() -> None:
            if self.netns:
                enter(self.netns)
            known: dict[int, int] = {}
            while not self._stop.is_set():
                try:
                    now = time.monotonic_ns()
                    answer = sorted(self.poll().items())
                except Exception as exc:
                    self._failed(exc)
                else:
                    self._answered()
                    if answer:
                        self._known.set()
                    for partition, leader in answer:
                        if known.get(partition) != leader:
                            self._changes.append({"at_ns": now, "partition": partition, "leader": leader})
                            known[partition] = leader
                self._stop.wait(0.25)

        self._thread = threading.Thread(target=watch, daemon=True, name="leader-watch")
        self._thread.start()

    def _failed(self, exc: Exception) -> None:
        self._errors += 1
        self._last_error = f"{type(exc).__name__}: {exc}"
        self._failing += 1
        if self._failing == 1:
            _log.warning("leader poll failed (counted with the cell; retried every 0.25 s): %s", self._last_error)

    def _answered(self) -> None:
        if self._failing:
            plural = "s" if self._failing > 1 else ""
            _log.info("leader poll answers again after %d failed poll%s", self._failing, plural)
            self._failing = 0

    def changes(self) -> list[dict[str, int]]:
        return list(self._changes)

    def wait_known(self, timeout_s: float) -> bool:
        """Wait until a poll has named a leader: the route exists and has one, so samples from now on are
        attributed to it. False if none was named within `timeout_s`."""
        return self._known.wait(timeout_s)

    def poll_errors(self) -> dict[str, int | str | None]:
        """How many polls failed during the watch, and the last failure: recorded with the cell."""
        return {"count": self._errors, "last": self._last_error}

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
