"""Chronicle Queue (seed 002): a Java library, measured through the JVM worker (docs/workers.md).

- `settings.py`: `ChronicleBroker` (storage, roll cycle, wait strategy), `ChronicleClient` (JVM flags), the cell;
- `release.py`: releases of net.openhft:chronicle-queue on Maven Central, each release's jars fetched and verified;
- `provision.py`, `keeper.py`: a cell's queue root folder and the keeper process that holds and removes it;
- `driver.py`: routes need no preparing, and no Python worker can play a role.

Analytics: chronicle-analytics would report to a host on the internet when a queue opens; every worker JVM runs
with the library's documented switch `-Dchronicle.analytics.disable=true` (a test asserts a cell opens no
connection off the host).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..base import System
from ..exports import lazy_attribute
from .settings import ChronicleBroker, ChronicleCell, ChronicleClient

# The library's switches, on every worker JVM: no analytics, no banner, no disk-space monitor thread.
QUIET_FLAGS = (
    "-Dchronicle.analytics.disable=true",
    "-Dchronicle.announcer.disable=true",
    "-Dchronicle.disk.monitor.disable=true",
)


class Chronicle(System):
    name: ClassVar[str] = "chronicle"
    cell_model = ChronicleCell
    setup_estimate_s = 6.0  # each worker is a JVM: ~1 s to start and open the queue on a small host
    calibration_measurement = "e2e"

    def label(self, spec: Any) -> str:
        b = spec.broker
        return f"chronicle/{b.storage} {b.roll_cycle.lower()} wait={b.wait}"

    def group_tag(self, spec: Any) -> str:
        return spec.broker.storage

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        """An append returns once the message is in the queue's mapped file: that return is the acknowledgement."""
        return True

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """Every appended message stays in the queue; a tailer reads every one."""
        return True

    def fetch_release(self, version: str) -> Path:
        from .release import libs

        return libs(self.resolve_version(version))

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Any:
        from .driver import ChronicleDriver

        return ChronicleDriver(address, spec, names, route, client)

    def worker_program(self, spec: Any, role: str) -> Any:
        """Every role is the JVM worker, on the cell's release."""
        from ...jvm.program import jvm_program
        from .release import JAVA17_FLAGS, libs

        b = spec.broker
        settings = {"chronicle.roll_cycle": b.roll_cycle, "chronicle.wait": b.wait}
        flags = (*JAVA17_FLAGS, *QUIET_FLAGS, *spec.client.jvm_flags)
        return jvm_program([libs(spec.version)], "chronicle", settings, flags, "spin" if b.wait == "busy" else "park")


CHRONICLE = Chronicle()

# public name -> module of this package, imported on first use (`systems/exports.py` says why)
_LAZY = {"JAVA17_FLAGS": "release"}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["CHRONICLE", "QUIET_FLAGS", "Chronicle", "ChronicleBroker", "ChronicleCell", "ChronicleClient", *_LAZY]
