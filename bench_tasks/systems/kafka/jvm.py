"""The JVM a Kafka node or tool runs in: the same heap and GC flags as Kafka's own start scripts, and the java it
finds.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache

from ...classdata import find_java
from ...errors import BrokerError

# Same heap and GC flags as Kafka's own kafka-server-start.sh / kafka-run-class.sh: a fixed 1 GiB heap never
# resizes during a measurement, and three nodes (3 GiB) fit a 24 GiB host with room for the generator.
DEFAULT_HEAP_OPTS: tuple[str, ...] = ("-Xms1g", "-Xmx1g")


DEFAULT_GC_OPTS: tuple[str, ...] = (
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


# The storage tool runs for a second; a small heap and the C1 compiler alone start it faster.
TOOL_JVM_OPTS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def default_jvm_opts() -> tuple[str, ...]:
    """Kafka's own heap and GC defaults. As in kafka-server-start.sh and kafka-run-class.sh, `$KAFKA_HEAP_OPTS`
    replaces the heap flags (a host with less memory shrinks the brokers without code changes) and
    `$KAFKA_JVM_PERFORMANCE_OPTS` the GC and compiler flags."""
    heap = os.environ.get("KAFKA_HEAP_OPTS", "").split()
    performance = os.environ.get("KAFKA_JVM_PERFORMANCE_OPTS", "").split()
    return (*(heap or DEFAULT_HEAP_OPTS), *(performance or DEFAULT_GC_OPTS))


def java_binary() -> str:
    found = find_java()
    if not found:
        raise BrokerError("no `java` on PATH (and no JAVA_HOME); Kafka needs a JVM (17+ for Kafka 4)")
    return found


@cache
@cache
def java_version(java: str) -> str:
    """`java -version` on one line, recorded with every node: the JVM is part of what was measured. Asked once
    per process and binary: each node of each cell would otherwise start a JVM for it after the brokers are up."""
    done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    return "; ".join(line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip())
