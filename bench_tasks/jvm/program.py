"""The JVM worker as a worker program (`load.contract.WorkerProgram`): its command line, for a system that hands
over its release's jars, the JVM flags its library needs and its plan settings.

The flags every JVM worker gets, and why:
- `-Xlog:disable -Xlog:all=warning:stderr`: the JVM's own messages go to stderr (the worker's log), never to stdout,
  which carries the contract's events;
- `-Xlog:safepoint=info:file={scratch}/safepoints.log:timenanos`: every safepoint (a GC pause is one) with its
  CLOCK_MONOTONIC end and its length, so a stall is named (`jvm.safepoints`);
- `-XX:-UsePerfData`: no hsperfdata file written to /tmp every few milliseconds;
- `-XX:MaxRAMPercentage=25`: a receiver keeps ten int64 columns per message until the end (800 MB for ten million).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ..load.contract import WorkerProgram
from . import safepoints
from .build import MAIN_CLASS, java, worker_jar

BASE_FLAGS = (
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    f"-Xlog:safepoint=info:file={{scratch}}/{safepoints.LOG_NAME}:timenanos",
    "-XX:-UsePerfData",
    "-XX:MaxRAMPercentage=25",
)


def jvm_program(
    libs: Sequence[Path],
    transport: str,
    settings: Mapping[str, str],
    flags: Sequence[str] = (),
    wait: str = "park",
) -> WorkerProgram:
    """The worker run on `libs` (folders of jars: a system's release) speaking `transport` with `settings`."""
    classpath = ":".join([str(worker_jar()), *(f"{lib}/*" for lib in libs)])
    argv = (java(), *BASE_FLAGS, *flags, "-cp", classpath, MAIN_CLASS)
    return WorkerProgram(argv, transport, dict(settings), "jvm", wait=wait, pauses=safepoints.read)
