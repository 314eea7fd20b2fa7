"""Faults fired during a cell's measure phase, on the schedule's clock: what a cell asks for, what fired, and the
injector the schedule loop ticks (the brokers' control protocol does the freezing and killing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from ..core.schedule import NS_PER_S
from ..errors import CellError


class BrokerControl(Protocol):
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def kill(self) -> None: ...


@dataclass(frozen=True)
class Fault:
    """A fault injected during `measure`: `stall` freezes the broker (SIGSTOP) for `duration_s`;
    `kill` ends it (SIGKILL). `at_s` counts from the start of the measure phase."""

    kind: Literal["stall", "kill"]
    at_s: float
    duration_s: float = 0.0


@dataclass
class FiredFault:
    kind: str
    start_ns: int
    end_ns: int | None = None


class FaultInjector:
    """Fires each fault when its time comes and thaws a stall when it has lasted; `close` thaws whatever is still
    frozen (a cell that fails mid-stall must not leave its broker stopped)."""

    def __init__(
        self,
        faults: Sequence[Fault],
        control: BrokerControl,
        measure_start_ns: int,
        clock: Callable[[], int],
        fired: list[FiredFault],
    ):
        """`fired` is the cell run's own list: what fired is on record even if the cell fails mid-fault."""
        self.pending = sorted(faults, key=lambda f: f.at_s)
        self.control = control
        self.measure_start_ns = measure_start_ns
        self.clock = clock
        self.fired = fired
        self._stall_end: int | None = None

    def tick(self, now: int) -> None:
        if self.pending and now >= self.measure_start_ns + int(self.pending[0].at_s * NS_PER_S):
            self._fire(self.pending.pop(0))
        if self._stall_end is not None and now >= self._stall_end:
            self._thaw()

    def _fire(self, fault: Fault) -> None:
        fired = FiredFault(fault.kind, self.clock())
        self.fired.append(fired)
        if fault.kind == "stall":
            self.control.pause()
            self._stall_end = fired.start_ns + int(fault.duration_s * NS_PER_S)
        else:
            self.control.kill()
            fired.end_ns = fired.start_ns

    def _thaw(self) -> None:
        self.control.resume()
        self._stall_end = None
        self.fired[-1].end_ns = self.clock()

    def close(self) -> None:
        if self._stall_end is not None:
            self.control.resume()
            self._stall_end = None


class NoFaults:
    """The broker control of a real host's part: faults are refused before a cell on real hosts starts."""

    def pause(self) -> None:
        raise CellError("?", "faults are not injected by load hosts")

    resume = kill = pause
