"""The JVM's safepoints from its unified log (`-Xlog:safepoint=info:file=…:timenanos`), as worker pauses.

HotSpot logs one line when a safepoint ends, e.g.
`[123456789012ns] Safepoint "G1CollectForAllocation", Time since last: 1000 ns, Reaching safepoint: 2000 ns,
At safepoint: 3000 ns, Total: 5000 ns`. The `timenanos` decoration is os::javaTimeNanos, System.nanoTime: on Linux
CLOCK_MONOTONIC, the clock of every other stamp, so a safepoint can be placed against the measure phase exactly.
Every Java thread is stopped for the `Total`; a G1 young pause is one of them (named G1CollectForAllocation).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..core.pauses import Pause

LOG_NAME = "safepoints.log"
_LINE = re.compile(r'^\[(\d+)ns\].*Safepoint "([^"]+)".*Total: (\d+) ns')


def parse(text: str) -> list[Pause]:
    """Every safepoint of a log: when it began, how long every thread was held, and its VM operation."""
    out = []
    for line in text.splitlines():
        found = _LINE.match(line)
        if found:
            end, name, total = int(found.group(1)), found.group(2), int(found.group(3))
            out.append(Pause(end - total, total, f"a JVM safepoint ({name})"))
    return out


def read(scratch: Path) -> list[Pause]:
    """The safepoints a worker's JVM logged in its scratch folder (none when it logged nothing)."""
    path = scratch / LOG_NAME
    return parse(path.read_text(errors="replace")) if path.exists() else []
