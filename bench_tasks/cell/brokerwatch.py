"""Faults nobody declared: a broker that exits, freezes or is replaced while a cell runs, without a fault of the
cell's doing, fails the cell and is marked on its timeline.

Without it a broker killed from outside mid-measure gave a cell `ok`: the producers' send errors and the lost
messages were only numbers in its accounting. The fault injector tells the watch each node it stalls, kills or
restarts (`declare_*`, called before the signal is sent, so no poll can see a declared fault as undeclared), and
a restarted node's new PID replaces the old one.

Provisioned nodes are watched by polling `/proc/<pid>/stat` from the schedule loop's tick (at most every
`POLL_EVERY_NS`), not by a pidfd: the stat file serves any process the harness can see, whether the generator
started it (the CLI: the node is its child) or attached it by PID (Airflow's detached brokers); it gives the
process state, so a node frozen (SIGSTOP) from outside is seen too; its start time tells a recycled PID from the
node; and a dead node's exit status is in it (field 52) for as long as it is a zombie, which a child of the
generator stays until teardown reaps it. A read costs a few microseconds per node, with no thread and no file
descriptor to keep. The time recorded is when the poll saw it (within ~50 ms of the event): the clock read after
the stat file was, not the tick's own time: a tick held up between the two (a loaded host, a paused VM) dated a kill
195 ms before it was sent in a clean-clone CI run.

External brokers are not the harness's processes: their endpoints (each host:port of the address) get a TCP
connect probe from a thread every `PROBE_EVERY_S`; an endpoint refusing `PROBES_IN_A_ROW` probes in a row is
recorded from the first refused probe.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

POLL_EVERY_NS = 20_000_000
STOPPED_FOR_NS = 1_000_000_000  # a node frozen this long outside a declared stall is not answering
PROBE_EVERY_S = 1.0
PROBE_TIMEOUT_S = 1.0
PROBES_IN_A_ROW = 3


@dataclass(frozen=True)
class Finding:
    """A broker event no fault declared: when it was seen (the cell's clock), its kind as a fault record's
    (`undeclared-exit`, `undeclared-replaced`, `undeclared-stop`, `undeclared-unreachable`), the node (None: an
    external endpoint) and what happened, in words."""

    at_ns: int
    kind: str
    node: int | None
    what: str


@dataclass(frozen=True)
class ProcStat:
    """What `/proc/<pid>/stat` says of a process: its state letter, start time (clock ticks after boot) and, for a
    zombie, its exit status as waitpid reports it."""

    state: str
    start_ticks: int
    exit_status: int | None


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when no process has that PID (it exited and was reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rsplit(")", 1)[1].split()  # the name (field 2) may hold spaces and parentheses
    exit_status = int(fields[49]) if len(fields) > 49 and fields[0] in "ZX" else None  # field 52, Linux >= 3.5
    return ProcStat(fields[0], int(fields[19]), exit_status)  # fields 3 and 22


def describe_exit(status: int | None) -> str:
    """A waitpid status in words: `killed by SIGKILL`, `exited with status 1`."""
    if status is None:
        return "exited (its status was collected before the watch saw it)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"killed by {signal.Signals(number).name}"
        except ValueError:
            return f"killed by signal {number}"
    return f"exited with status {os.WEXITSTATUS(status)}"


class BrokerWatch:
    """The base: declarations are accepted and nothing is watched (brokers of a real host's part, which its
    own host watches)."""

    def start(self, clock: Callable[[], int]) -> None:
        """Begin watching; `clock` is the cell's."""

    def tick(self, now_ns: int, force: bool = False) -> None:
        """Look again if it is time to (`force`: now)."""

    def findings(self) -> list[Finding]:
        return []

    def stop(self) -> None:
        """Stop watching (a probe thread ends)."""

    def declare_stall(self, node: int) -> None: ...
    def declare_thaw(self, node: int) -> None: ...
    def declare_exit(self, node: int) -> None: ...
    def declare_replaced(self, node: int, pid: int) -> None: ...


@dataclass
class _Node:
    pid: int
    start_ticks: int | None = None
    stalled: bool = False
    thawed_ns: int | None = None  # when a declared stall ended: SIGCONT is not instant either
    stopped_since: int | None = None
    gone: bool = False  # exited: declared, or reported once


class NodeWatch(BrokerWatch):
    """The nodes the harness started, by PID: see the module docstring. `companions`: PID -> name of processes the
    nodes cannot serve without (a ZooKeeper): never a fault's target, so an exit or replacement of one is always
    undeclared (a finding without a node)."""

    def __init__(self, nodes: Mapping[int, int], process_name: str, companions: Mapping[int, str] | None = None):
        self.process_name = process_name
        self.nodes = {node: _Node(pid) for node, pid in nodes.items()}
        self.companions = {pid: (name, _Node(pid)) for pid, name in (companions or {}).items()}
        self._found: list[Finding] = []
        self._next_ns = 0
        self._clock: Callable[[], int] = time.monotonic_ns

    def start(self, clock: Callable[[], int]) -> None:
        """Note each node's start time; a node already gone is a finding at once."""
        self._clock = clock
        self._next_ns = 1  # started: the first tick looks
        for node, watched in self.nodes.items():
            self._identify(node, watched)
        for name, companion in self.companions.values():
            stat = read_stat(companion.pid)
            companion.start_ticks = stat.start_ticks if stat is not None and stat.state not in "ZX" else None
            if companion.start_ticks is None:
                self._companion_gone(name, companion, describe_exit(stat and stat.exit_status), self._clock())

    def _identify(self, node: int, watched: _Node) -> None:
        stat = read_stat(watched.pid)
        if stat is None or stat.state in "ZX":
            self._report(node, watched, "undeclared-exit", describe_exit(stat and stat.exit_status))
            return
        watched.start_ticks = stat.start_ticks

    def tick(self, now_ns: int, force: bool = False) -> None:
        if self._next_ns == 0 or (now_ns < self._next_ns and not force):  # not started, or not yet time
            return
        self._next_ns = now_ns + POLL_EVERY_NS
        for node, watched in self.nodes.items():
            if not watched.gone:
                self._look(node, watched)
        for name, companion in self.companions.values():
            if not companion.gone:
                self._look_at_companion(name, companion)

    def _look(self, node: int, watched: _Node) -> None:
        stat = read_stat(watched.pid)
        seen_ns = self._clock()  # after the read: what it saw had happened by then
        if stat is None or stat.state in "ZX":
            self._report(node, watched, "undeclared-exit", describe_exit(stat and stat.exit_status), seen_ns)
        elif stat.start_ticks != watched.start_ticks:
            self._report(node, watched, "undeclared-replaced", "was replaced: its PID is now another process", seen_ns)
        elif stat.state in "Tt" and not self._stall_declared(watched, seen_ns):
            watched.stopped_since = watched.stopped_since or seen_ns
            if seen_ns - watched.stopped_since >= STOPPED_FOR_NS:
                froze = f"was frozen (state {stat.state}) for {STOPPED_FOR_NS / 1e9:g} s: it does not answer"
                self._found.append(Finding(watched.stopped_since, "undeclared-stop", node, self._who(node, froze)))
                watched.gone = True  # once: a frozen node stays failed whatever it does next
        else:
            watched.stopped_since = None

    def _look_at_companion(self, name: str, companion: _Node) -> None:
        stat = read_stat(companion.pid)
        seen_ns = self._clock()
        if stat is None or stat.state in "ZX":
            self._companion_gone(name, companion, describe_exit(stat and stat.exit_status), seen_ns)
        elif stat.start_ticks != companion.start_ticks:
            self._companion_gone(name, companion, "was replaced: its PID is now another process", seen_ns)

    def _companion_gone(self, name: str, companion: _Node, what: str, at_ns: int) -> None:
        companion.gone = True
        kind = "undeclared-replaced" if what.startswith("was replaced") else "undeclared-exit"
        self._found.append(Finding(at_ns, kind, None, f"{name} (pid {companion.pid}), which the nodes need, {what}"))

    def _stall_declared(self, watched: _Node, now_ns: int) -> bool:
        thawing = watched.thawed_ns is not None and now_ns - watched.thawed_ns < STOPPED_FOR_NS
        return watched.stalled or thawing

    def _report(self, node: int, watched: _Node, kind: str, what: str, now_ns: int | None = None) -> None:
        watched.gone = True
        at = self._clock() if now_ns is None else now_ns
        self._found.append(Finding(at, kind, node, self._who(node, what)))

    def _who(self, node: int, what: str) -> str:
        return f"broker node {node} ({self.process_name} pid {self.nodes[node].pid}) {what}"

    def findings(self) -> list[Finding]:
        return list(self._found)

    def declare_stall(self, node: int) -> None:
        if node in self.nodes:
            self.nodes[node].stalled = True

    def declare_thaw(self, node: int) -> None:
        if node in self.nodes:
            self.nodes[node].stalled = False
            self.nodes[node].thawed_ns = self._clock()

    def declare_exit(self, node: int) -> None:
        if node in self.nodes:
            self.nodes[node].gone = True

    def declare_replaced(self, node: int, pid: int) -> None:
        """A declared restart: the node is watched again under its new PID."""
        watched = self.nodes[node] = _Node(pid)
        self._identify(node, watched)


class EndpointWatch(BrokerWatch):
    """External brokers: a TCP connect probe of each endpoint from a thread (see the module docstring)."""

    def __init__(self, endpoints: list[tuple[str, int]]):
        self.endpoints = endpoints
        self._refused: dict[tuple[str, int], list[int]] = {e: [] for e in endpoints}  # when each probe failed
        self._found: list[Finding] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._clock: Callable[[], int] = time.monotonic_ns

    def start(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        if self.endpoints:
            self._thread = threading.Thread(target=self._probe_loop, name="endpoint-watch", daemon=True)
            self._thread.start()

    def _probe_loop(self) -> None:
        while not self._stopping.is_set():
            self._probe_all(PROBES_IN_A_ROW)
            self._stopping.wait(PROBE_EVERY_S)

    def _probe_all(self, in_a_row: int) -> None:
        """Probe each endpoint not yet reported; one refused `in_a_row` times is reported, from its first."""
        for endpoint in [e for e in self.endpoints if e in self._refused]:
            at, problem = self._clock(), probe(*endpoint)
            self._refused[endpoint] = [*self._refused[endpoint], at] if problem else []
            if problem and len(self._refused[endpoint]) >= in_a_row:
                first_at = self._refused.pop(endpoint)[0]  # reported once
                what = f"external broker {endpoint[0]}:{endpoint[1]} stopped accepting connections ({problem})"
                with self._lock:
                    self._found.append(Finding(first_at, "undeclared-unreachable", None, what))

    def findings(self) -> list[Finding]:
        with self._lock:
            return list(self._found)

    def stop(self) -> None:
        """End the probes; an endpoint refusing since its last probe and refusing once more now is reported (the
        cell ended before its probes in a row were done)."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(PROBE_TIMEOUT_S * len(self.endpoints) + PROBE_EVERY_S + 1)
            self._thread = None
            if any(self._refused.values()):
                self._probe_all(2)


def probe(host: str, port: int) -> str | None:
    """Why a TCP connection to host:port failed, or None when it was accepted."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def endpoints_of(address: str) -> list[tuple[str, int]]:
    """Each host:port of a broker address: `h:p`, `h1:p1,h2:p2`, `scheme://user@h:p/…` (an item without a port
    is left out: its port is the client library's default, which this does not guess)."""
    found = []
    for item in address.split(","):
        item = item.strip()
        parts = urlsplit(item if "://" in item else f"//{item}")
        try:
            port = parts.port
        except ValueError:
            continue
        if parts.hostname and port:
            found.append((parts.hostname, port))
    return found


def watch_for(brokers: Any) -> BrokerWatch:
    """The watch of a cell's brokers (a `BrokerHandle`): its nodes by PID, or an external cluster's endpoints."""
    if brokers.node_pids():
        return NodeWatch(brokers.node_pids(), brokers.process_name, brokers.vital_companions())
    return EndpointWatch(endpoints_of(brokers.address))
