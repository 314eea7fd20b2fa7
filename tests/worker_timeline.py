"""When each xdist worker of a session ended, and what it ran: which worker bounds a part of `make test`.

A part lasts as long as its last worker. The slowest tests alone do not say whose files ran last, nor how long a
worker sat idle once its queue was empty, so the session's controller collects each test's start and stop (from
the reports its workers send) and lists, per worker, when it ran its first and last test, how long its tests took,
and its longest and last files with their times.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

SHOWN_FILES = 4


@dataclass
class FileSpan:
    """One test file's run on one worker: the first start and last stop of its tests (epoch seconds)."""

    path: str
    start: float
    stop: float


@dataclass(eq=False)  # registered as a plugin: pluggy keeps plugins in sets
class WorkerTimeline:
    """Per worker, its files in the order they ran."""

    started: float = field(default_factory=time.time)
    files: dict[str, list[FileSpan]] = field(default_factory=lambda: defaultdict(list))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Record one phase (setup, call, teardown) of one test from the worker that ran it (a hook: registered
        as a plugin in the controller, which sees every worker's reports; a report without a worker is ignored)."""
        node = getattr(report, "node", None)
        if node is None:
            return
        spans = self.files[node.gateway.id]
        path = report.nodeid.split("::", 1)[0]
        if spans and spans[-1].path == path:
            spans[-1].stop = max(spans[-1].stop, report.stop)
        else:
            spans.append(FileSpan(path, report.start, report.stop))

    def lines(self) -> list[str]:
        """A line per worker, the one that ended last first, each followed by its longest files and its last."""
        out = []
        ranked = sorted(self.files.items(), key=lambda item: -item[1][-1].stop)
        for worker, spans in ranked:
            busy = sum(span.stop - span.start for span in spans)
            out.append(
                f"{worker}: tests from {spans[0].start - self.started:.0f} s to {spans[-1].stop - self.started:.0f} s"
                f" of the session, {busy:.0f} s in {len(spans)} file(s)"
            )
            longest = sorted(spans, key=lambda span: span.start - span.stop)[:SHOWN_FILES]
            out += ["  longest:", *map(_line, longest), "  last:", *map(_line, spans[-SHOWN_FILES:])]
        return out


def _line(span: FileSpan) -> str:
    return f"    {span.stop - span.start:6.1f}s  {span.path}"
