"""Who leads each partition (or stream) of a cell's measured route, watched for the whole cell.

Leaders are polled from a thread (a stalled broker must not stall the cell's monitor loop), inside the brokers'
network namespace when they run in one; every change lands with the results so each received sample can be
attributed to the node that led its partition when it arrived, and faults aimed at "the leader" hit that node.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping

from ..topology.netns import enter

# partition -> leader node, as the cluster says now (a partition left out has no known leader: an election)
LeaderPoll = Callable[[], Mapping[int, int]]


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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        def watch() -> None:
            if self.netns:
                enter(self.netns)
            known: dict[int, int] = {}
            while not self._stop.is_set():
                with contextlib.suppress(Exception):
                    now = time.monotonic_ns()
                    for partition, leader in sorted(self.poll().items()):
                        if known.get(partition) != leader:
                            self._changes.append({"at_ns": now, "partition": partition, "leader": leader})
                            known[partition] = leader
                self._stop.wait(0.25)

        self._thread = threading.Thread(target=watch, daemon=True, name="leader-watch")
        self._thread.start()

    def changes(self) -> list[dict[str, int]]:
        return list(self._changes)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
