"""Where the generators of one cell on several real hosts meet: a folder of the lake every host can read.

Airflow runs one generate task per load-generator host, each on its host's queue, and the lake is all those
hosts share (each Celery worker has its own disk). So each host writes small JSON notes, one atomic object
each, under `<folder>/<kind>/<host>.json` and polls for the others':

    prepared   the first load host created the cell's routes (topics, streams, prefill)
    clock      a consumer host's clock server (address), for a matrix that measures cross-domain offsets
    ready      a host's workers listen and its producers wait; carries its wall-clock time
    progress   what a host's producers sent and its receivers got, once its producers are done
    failed     why a host gave up: the others stop waiting at once instead of timing out

The poll interval is coarse (a few hundred ms) because nothing measured depends on it: the common start
time lies a margin after the last host was ready, and a drain only ends a little later.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..errors import CellError
from ..lake.storage import LakePath, write_text
from .clock import Clock, host_clock, wall_shift_ns

POLL_S = 0.2
START_MARGIN_NS = 2_000_000_000  # after the last host was ready: every host has read the notes by then


@dataclass(frozen=True)
class Rendezvous:
    """The notes of one cell's hosts. `me` writes; every host in `hosts` is waited for."""

    folder: LakePath
    hosts: tuple[str, ...]
    me: str
    cell_id: str

    def note(self, kind: str, data: dict[str, Any]) -> None:
        write_text(self.folder / kind / f"{self.me}.json", json.dumps({"host": self.me, **data}))

    def read(self, kind: str, host: str) -> dict[str, Any] | None:
        try:
            return json.loads((self.folder / kind / f"{host}.json").read_text())
        except FileNotFoundError:
            return None

    def notes(self, kind: str, hosts: tuple[str, ...] | None = None) -> dict[str, dict[str, Any]]:
        found = {h: self.read(kind, h) for h in (hosts if hosts is not None else self.hosts)}
        return {h: n for h, n in found.items() if n is not None}

    def fail(self, reason: str) -> None:
        """Tell the other hosts this one gave up (they stop waiting for it)."""
        self.note("failed", {"reason": reason})

    def check_others(self) -> None:
        """Raise if another host gave up: waiting on would only end in a timeout."""
        others = tuple(h for h in self.hosts if h != self.me)
        for host, failed in self.notes("failed", others).items():
            raise CellError(self.cell_id, f"host {host} failed: {failed['reason']}")

    def wait(self, kind: str, timeout_s: float, hosts: tuple[str, ...] | None = None, hint: str = "") -> dict:
        """Every note of `kind` from `hosts` (default: all), polling; a clear error naming the hosts missing."""
        wanted = hosts if hosts is not None else self.hosts
        deadline = time.monotonic() + timeout_s
        while True:
            self.check_others()
            found = self.notes(kind, wanted)
            if len(found) == len(wanted):
                return found
            if time.monotonic() > deadline:
                missing = ", ".join(h for h in wanted if h not in found)
                why = f" ({hint})" if hint else ""
                raise CellError(self.cell_id, f"host(s) {missing} not {kind} after {timeout_s:.0f} s{why}")
            time.sleep(POLL_S)


@dataclass
class HostPart:
    """This host's share of a cell split over real hosts: which host it is, the notes it meets the others by,
    whether it prepares the routes (the first load host does), and the host clock every stamp is taken on."""

    host: str
    rendezvous: Rendezvous
    leader: bool
    clock_shift_ns: int = field(default_factory=wall_shift_ns)

    @property
    def clock(self) -> Clock:
        return host_clock(self.clock_shift_ns)

    def agree_t0(self, timeout_s: float) -> int:
        """Note this host ready, wait for every host, and return the common start on the host clock: the latest
        ready time plus a margin. Every host computes it from the same notes, so all get the same instant
        (as far as their wall clocks agree: that is the clock-domain assumption, recorded with the cell)."""
        self.rendezvous.note("ready", {"wall_ns": self.clock()})
        ready = self.rendezvous.wait(
            "ready", timeout_s, hint="is a worker serving each host's queue running, and did its generate task start?"
        )
        return max(int(n["wall_ns"]) for n in ready.values()) + START_MARGIN_NS
