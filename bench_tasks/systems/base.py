"""What the core asks of a broker system: one `System` per system, described by its own package.

The core (matrix parsing, the cell's life, the generator, landing, the CLI, Airflow, Spark, the report) reaches
a system only through this interface and the registry (`bench_tasks.systems`), never by its name, the way
OpenMessaging Benchmark's core never names a driver. Methods that need a system's client library or broker
code import it when called, so parsing a matrix (Airflow does it at DAG parse time) loads neither.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ..spec.cell import CellBase, Measurement


class System:
    """A broker system. Subclasses set the class attributes and override what differs from the defaults."""

    name: ClassVar[str]
    cell_model: ClassVar[type[CellBase]]
    # Seconds a cell typically spends outside its schedule on a small host (brokers started and stopped,
    # workers spawned, stragglers drained, the cell landed): what `sixnines cells` plans a sweep with.
    setup_estimate_s: ClassVar[float] = 5.0
    calibration_measurement: ClassVar[Measurement] = "e2e"  # the CTRL+Z test's default shape
    calibration_broker: ClassVar[Mapping[str, Any]] = {}  # one node, the simplest that can be frozen

    @property
    def versions(self) -> tuple[str, ...]:
        """Known releases, newest first."""
        return self.cell_model.VERSIONS

    def resolve_version(self, version: str) -> str:
        """`latest` → the newest known release; a concrete version is returned unchanged."""
        return self.versions[0] if version == "latest" else version

    def label(self, spec: Any) -> str:
        """The system's part of a cell's label (`kafka b3 p1 rf3 acks=all`)."""
        return self.name

    def group_tag(self, spec: Any) -> str:
        """A short tag of the broker's shape for Airflow TaskGroup ids (`c01_<system>_<tag>_<measurement>`)."""
        return "default"

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        """Does the broker acknowledge a send (so `publish` latency exists), given the broker settings as a
        mapping (a model's dump, or a spec read back from the lake)?"""
        return True
