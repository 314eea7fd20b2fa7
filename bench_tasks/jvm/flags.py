"""The JVM options a matrix's `jvm_flags` may not set, because the harness sets them itself (`jvm.program`). Kept
apart from the program's command line so that validating a matrix imports nothing heavy (Airflow parses matrices)."""

from __future__ import annotations

from collections.abc import Mapping

HARNESS_FLAGS: dict[str, str] = {
    "-Xlog": "the worker's safepoint log and stderr logging are the harness's (jvm.program)",
    "-cp": "the classpath is the worker and the cell's release",
    "-classpath": "the classpath is the worker and the cell's release",
}


def owned_flag(flag: str, owned: Mapping[str, str] = HARNESS_FLAGS) -> str | None:
    """Why the harness sets `flag` itself (so a matrix may not), or None."""
    return owned.get(flag.split("=")[0].split(":")[0])
