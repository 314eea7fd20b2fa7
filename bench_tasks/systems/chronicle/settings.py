"""Chronicle Queue settings: where a cell's queue lives, how it rolls, and how its readers wait.

Chronicle Queue is a Java library, not a server: a cell's "broker" is one queue folder per route (the measured
queue, a chain's second hop), on tmpfs (`/dev/shm`, memory only) or on disk (the cell's work folder), appended to
and tailed by the cell's JVM workers (docs/workers.md). The roll cycle (how often the queue starts a new file) and
the tailers' wait strategy (`busy`: spin on an empty queue, Pauser.busy; `pauser`: back off, Pauser.balanced) are
recorded with every cell: both move the tail. `jvm_flags` pass through to the workers' JVMs untouched.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...jvm.flags import HARNESS_FLAGS as JVM_HARNESS_FLAGS
from ...jvm.flags import owned_flag
from ...spec.cell import BrokerSettings, CellBase, ClientSettings

Storage = Literal["tmpfs", "disk"]
Wait = Literal["busy", "pauser"]
# Roll cycles every release from 5.22 to 2026.x names the same way (RollCycles.valueOf in the worker).
RollCycle = Literal[
    "FIVE_MINUTELY",
    "TEN_MINUTELY",
    "TWENTY_MINUTELY",
    "HALF_HOURLY",
    "FAST_HOURLY",
    "TWO_HOURLY",
    "FOUR_HOURLY",
    "SIX_HOURLY",
    "FAST_DAILY",
]
# JVM options the harness sets itself, and why a matrix may not.
HARNESS_FLAGS: dict[str, str] = {
    **JVM_HARNESS_FLAGS,
    "-Dchronicle.analytics.disable": "chronicle-analytics stays off: a cell opens no connection off the host",
}


class ChronicleBroker(BrokerSettings):
    """Where the cell's queue folders live and how the queue rolls and is waited on."""

    storage: Storage = Field("tmpfs", description="tmpfs: /dev/shm (memory only); disk: the cell's work folder")
    roll_cycle: RollCycle = Field("FAST_HOURLY", description="how often the queue starts a new file (RollCycles)")
    # pauser by default: a spinning tailer is always runnable, so on a host with fewer free cores than spinning
    # threads it waits for a CPU most of the time and the cell fails as starved (measured on this 2-core host).
    wait: Wait = Field("pauser", description="how a tailer waits on an empty queue: busy (spin) or pauser (back off)")

    @field_validator("server")
    @classmethod
    def _no_server(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value:
            raise ValueError("server: Chronicle Queue is a library with no server to configure; leave it out")
        return value


class ChronicleClient(ClientSettings):
    """The JVM workers' own options (heap, GC), passed to every worker JVM untouched."""

    jvm_flags: list[str] = Field(default_factory=list, description="extra JVM options of every worker, verbatim")

    @field_validator("jvm_flags")
    @classmethod
    def _not_harness_owned(cls, value: list[str]) -> list[str]:
        for flag in value:
            reason = owned_flag(flag, HARNESS_FLAGS)
            if reason is not None:
                raise ValueError(f"jvm_flags: {flag}: set by the harness ({reason})")
        return value


class ChronicleCell(CellBase):
    """One Chronicle Queue cell: JVM workers append to and tail queue folders on this host."""

    SYSTEM: ClassVar[str] = "chronicle"
    system: Literal["chronicle"]
    broker: ChronicleBroker = ChronicleBroker()
    client: ChronicleClient = ChronicleClient()

    @model_validator(mode="after")
    def _fits_chronicle(self) -> ChronicleCell:
        problems = cell_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self


def cell_problems(cell: ChronicleCell) -> list[str]:
    """What a Chronicle Queue cell cannot be, refused by field rather than measured as something else."""
    w = cell.workload
    problems = []
    if cell.measurement == "rtt":
        problems.append("measurement 'rtt': Chronicle Queue has no request/reply; use e2e, publish or chain")
    if cell.measurement == "chain" and w.relays > 1:
        problems.append(f"workload.relays {w.relays}: every relay's tailer reads every message; use 1")
    if cell.brokers == "external":
        problems.append("brokers 'external': a Chronicle Queue lives on the cell's host; use provisioned")
    if w.consumers > 1 and cell.measurement != "publish":
        problems.append(
            f"workload.consumers {w.consumers}: every tailer reads every message of a queue, so each would count it; "
            "use 1"
        )
    if w.prefill_messages or w.lagging_consumers:
        problems.append("workload.prefill_messages and lagging_consumers are not built for Chronicle cells")
    if w.placement is not None:
        problems.append("workload.placement: JVM workers run on the driving host only")
    if cell.background:
        problems.append("background: not built for Chronicle cells")
    return problems
