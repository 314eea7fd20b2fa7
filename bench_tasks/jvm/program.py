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

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

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
    secret_env: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None,
) -> WorkerProgram:
    """The worker run on `libs` (folders of jars, or jars: a system's release) speaking `transport` with
    `settings`; `secret_env` carries secret client settings (`WorkerProgram.secret_env`)."""
    classpath = ":".join([str(worker_jar()), *(str(lib) if lib.suffix == ".jar" else f"{lib}/*" for lib in libs)])
    argv = (java(), *BASE_FLAGS, *flags, "-cp", classpath, MAIN_CLASS)
    return WorkerProgram(
        argv, transport, dict(settings), "jvm", wait=wait, pauses=safepoints.read, secret_env=secret_env
    )
