"""The JVM options a matrix's `jvm_flags` may not set, because the harness sets them itself (`jvm.program`). Kept
apart from the program's command line so that validating a matrix imports nothing heavy (Airflow parses matrices)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HARNESS_FLAGS: dict[str, str] = {
    "-Xlog": "the worker's safepoint log and stderr logging are the harness's (jvm.program)",
    "-cp": "the classpath is the worker and the cell's release",
    "-classpath": "the classpath is the worker and the cell's release",
}


def owned_flag(flag: str, owned: Mapping[str, str] = HARNESS_FLAGS) -> str | None:
    """Why the harness sets `flag` itself (so a matrix may not), or None."""
    return owned.get(flag.split("=")[0].split(":")[0])


def java_path_refusals(cell: Any, python_client: str, *, push_clients: bool = False) -> list[str]:
    """What every system's Java-client path refuses, each naming its field: JVM flags on the Python client or that
    the harness sets, and a placement on other hosts (worker programs run on the driving host only). With
    `push_clients` (RabbitMQ, Redis: the worker has no responder, and does not reconnect to another node): rtt,
    faults, and the Python client's own connection arguments too."""
    c = cell.client
    if c.library != "java":
        return [f"client.jvm_flags: only for client.library java (is {c.library})"] if c.jvm_flags else []
    problems = [f"client.jvm_flags: {f}: set by the harness ({owned_flag(f)})" for f in c.jvm_flags if owned_flag(f)]
    if cell.workload.placement is not None:
        problems.append("workload.placement: the Java client runs in the JVM worker, on the driving host only")
    if not push_clients:
        return problems
    if cell.measurement == "rtt":
        problems.append(f"measurement 'rtt': the JVM worker has no responder; use library {python_client}")
    if cell.faults:
        problems.append(f"faults: the Java client's path does not reconnect to another node; use {python_client}")
    if c.connect:
        problems.append(f"client.connect: {python_client}'s connection arguments; not with library java")
    return problems
