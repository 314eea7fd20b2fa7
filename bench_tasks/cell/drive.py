"""Drive one cell on a running broker: start workers, fix t0, inject faults, drain, stop — as one schedule.

The parent only orchestrates; every timestamp of a message is taken in a worker. Load runs without a
gap from warmup start to cooldown end: phases are cut afterwards by intended time. Whatever happens, no
worker process outlives this function.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from rich.console import Console

from ..core.percentiles import summarize
from ..core.schedule import NS_PER_S, PhasePlan
from ..errors import CellError
from ..load.drivers import driver_for, routes
from ..load.generator import Channels, WorkerPlan, worker_main
from ..load.live import LiveMonitor
from ..load.loop import run_precise
from ..load.routes import MEASURED, Target, final_route
from ..spec.matrix import Cell
from ..topology import HOSTS_TIMEOUT_S
from ..topology.hosts import broker_site, cell_routes, clock_offsets, host_of, worker_netns, worker_route
from ..topology.netns import Topology, inside
from ..topology.rendezvous import HostPart

_START_MARGIN_NS = 200_000_000  # between "all producers ready" and t0
_READY_TIMEOUT_S = 60.0
_PROGRESS_EVERY_NS = 500_000_000  # a host part's progress note while it waits for the other hosts


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


@dataclass
class CellRun:
    plan: PhasePlan
    wall_t0_s: float
    staging: Path
    faults: list[FiredFault] = field(default_factory=list)
    lagging_consumed: int = 0  # messages the unmeasured lagging consumers read
    background: dict[str, dict] = field(default_factory=dict)  # per background workload: counts, send lag
    relayed: int = 0  # chain: messages the relays forwarded
    clock_offsets: list[dict] = field(default_factory=list)  # measured across clock domains, when the matrix asks
    harness: dict[str, dict] = field(default_factory=dict)  # per worker: how busy and backed up it was (saturation)

    def faults_dicts(self) -> list[dict]:
        return [asdict(f) for f in self.faults]

    def facts(self) -> dict[str, Any]:
        """What `land` needs of the run, as JSON (the generator's `cellrun.json`, a host part's `facts` note)."""
        return {
            "plan": asdict(self.plan),
            "wall_t0_s": self.wall_t0_s,
            "faults": self.faults_dicts(),
            "lagging_consumed": self.lagging_consumed,
            "background": self.background,
            "relayed": self.relayed,
            "clock_offsets": self.clock_offsets,
            "harness": self.harness,
        }

    @classmethod
    def from_facts(cls, facts: dict[str, Any], staging: Path) -> CellRun | None:
        """The run `facts()` describes, its samples in `staging`; None when the schedule never started."""
        plan = facts.get("plan")
        if not plan:
            return None
        return cls(
            PhasePlan(**plan),
            facts["wall_t0_s"],
            staging,
            [FiredFault(**f) for f in facts.get("faults", [])],
            facts.get("lagging_consumed", 0),
            facts.get("background", {}),
            facts.get("relayed", 0),
            facts.get("clock_offsets", []),
            facts.get("harness", {}),
        )


def receiver_role(cell: Cell) -> str | None:
    return {"e2e": "consumer", "chain": "consumer", "rtt": "responder", "publish": None}[cell.spec.measurement]


def drive_cell(
    cell: Cell,
    url: str | Target,
    staging: Path,
    control: BrokerControl,
    console: Console,
    faults: Sequence[Fault] = (),
    on_status: Callable[[LiveMonitor], None] | None = None,
    topology: Topology | None = None,
    part: HostPart | None = None,
) -> CellRun:
    """Run the cell's whole schedule against the brokers. `url` is the brokers' address, or a Target carrying
    client security settings and route names too. With a topology, each worker runs in its host's network
    namespace (and the parent reaches the broker from the broker's namespace). With a host part, only this
    host's workers run, on the host clock, starting at the time all hosts agree on (`hostparts`)."""
    spec, w = cell.spec, cell.spec.workload
    target = url if isinstance(url, Target) else Target(url)
    names = target.names or cell.instance
    check_cpus(cell)
    ctx = mp.get_context("spawn")
    phase_ns = (int(w.warmup_s * NS_PER_S), int(w.measure_s * NS_PER_S), int(w.cooldown_s * NS_PER_S))
    channels = Channels(events=ctx.Queue(), start_at_ns=ctx.Value("q", 0), stop=ctx.Event(), phase_ns=phase_ns)
    all_routes = {**routes(spec), **dict.fromkeys(cell_routes(cell), spec)}  # + one per clock domain, if split
    drivers = {
        route: driver_for(target.address, route_spec, names, route, target.client)
        for route, route_spec in all_routes.items()
    }
    driver = drivers[MEASURED]
    clock = part.clock if part is not None else time.monotonic_ns

    async def prepare() -> None:
        try:
            for route_driver in drivers.values():  # the measured topic, a chain's second hop, background ones
                if not target.prepared:  # external brokers: provision created them
                    await route_driver.prepare()
            if w.prefill_messages:
                total, step = w.prefill_messages, max(1, w.prefill_messages // 10)

                def progress(done: int) -> None:
                    if done % step < 10_000 or done == total:  # about every 10 %
                        console.print(f"prefill: {done}/{total} messages of {w.message_size_bytes} B", highlight=False)

                await driver.prefill(total, w.message_size_bytes, progress)  # type: ignore[attr-defined]
        finally:
            for route_driver in drivers.values():
                await route_driver.close()

    if part is None or part.leader:  # a host part: the first load host makes the routes, the others wait for it
        with inside(broker_site(cell, topology)[0]):
            run_precise(prepare())
    if part is not None:
        if part.leader:
            part.rendezvous.note("prepared", {})
        else:
            leader = part.rendezvous.hosts[:1]
            part.rendezvous.wait("prepared", HOSTS_TIMEOUT_S, leader, hint="the first load host creates the routes")
    # only where the matrix accepts cross-domain e2e
    offsets = clock_offsets(cell, topology, part)
    cell_json = spec.model_dump_json()

    def process(role: str, index: int, route: str = MEASURED, **extra: Any) -> Any:
        cpus = w.cpus.producers if role in ("producer", "background") else w.cpus.receivers
        route = worker_route(cell, role, index, route)
        plan = WorkerPlan(
            role,
            index,
            target.address,
            cell.instance,
            cell_json,
            str(staging),
            tuple(cpus),
            route,
            client=dict(target.client),
            names=names,
            netns=worker_netns(cell, topology, role, index),
            clock_shift_ns=part.clock_shift_ns if part is not None else 0,
            **extra,
        )
        return ctx.Process(target=worker_main, args=(plan, channels), name=f"{role}-{index}", daemon=True)

    def mine(role: str, count: int) -> list[int]:
        """The indexes of `role` that run here: all of them, or on a host part the ones placed on this host."""
        return [i for i in range(count) if part is None or host_of(cell, role, i) == part.host]

    role = receiver_role(cell)
    receivers = [process(role, i, route=final_route(spec)) for i in mine(role or "", w.consumers if role else 0)]
    relays = [process("relay", i) for i in mine("relay", w.relays if spec.measurement == "chain" else 0)]
    laggards = [process("laggard", i) for i in mine("laggard", w.lagging_consumers)]
    active = [(name, bg) for name, bg in spec.background.items() if bg.producers]
    background_parts = [(name, k) for name, bg in active for k in range(bg.processes)]
    background = [process("background", i, background=n, part=k) for i, (n, k) in enumerate(background_parts)]
    background_readers = [name for name, bg in active for _ in range(bg.consumers)]
    background_consumers = [process("bg_consumer", i, background=n) for i, n in enumerate(background_readers)]
    producers = [process("producer", i) for i in mine("producer", w.producers)]
    senders = producers + background
    listeners = receivers + relays + laggards + background_consumers
    label = f"{cell.label} @ {part.host}" if part is not None else cell.label
    monitor = LiveMonitor(label, spec.measurement, console, on_status)
    monitor.clock = clock
    run: CellRun | None = None
    paused = False
    try:
        with monitor:
            # Downstream first: nothing may be sent before whoever must receive it is listening.
            for group in (receivers, relays, laggards + background_consumers, senders):
                for p in group:
                    p.start()
                _await_roles(channels, monitor, group, "ready", _READY_TIMEOUT_S, cell.id)
            if part is None:
                t0 = time.monotonic_ns() + _START_MARGIN_NS
                wall_t0_s = time.time() + _START_MARGIN_NS / 1e9
            else:  # the host clock is the wall clock's epoch at the monotonic clock's rate
                t0 = part.agree_t0(HOSTS_TIMEOUT_S)
                wall_t0_s = t0 / NS_PER_S
            channels.start_at_ns.value = t0
            run = CellRun(PhasePlan(t0, *phase_ns), wall_t0_s, staging, clock_offsets=offsets)
            monitor.plan = run.plan
            pending = sorted(faults, key=lambda f: f.at_s)
            finish_by = run.plan.end_ns + int((w.request_timeout_s + 30) * NS_PER_S)
            done: set[str] = set()
            stall_end: int | None = None
            while not all(p.name in done for p in senders):
                _pump(channels, monitor, done, cell.id, senders + listeners)
                now = clock()
                if pending and now >= run.plan.measure_start_ns + int(pending[0].at_s * NS_PER_S):
                    fault = pending.pop(0)
                    fired = FiredFault(fault.kind, clock())
                    run.faults.append(fired)
                    if fault.kind == "stall":
                        control.pause()
                        paused = True
                        stall_end = fired.start_ns + int(fault.duration_s * NS_PER_S)
                    else:
                        control.kill()
                        fired.end_ns = fired.start_ns
                if paused and stall_end is not None and now >= stall_end:
                    control.resume()
                    paused = False
                    run.faults[-1].end_ns = clock()
                if now > finish_by:
                    raise CellError(cell.id, "producers did not finish their schedule in time")
            if part is not None:  # this host's producers are done; the others' may not be
                _await_hosts_sent(part, channels, monitor, done, cell.id, listeners, finish_by)
            # Drain: wait for stragglers until everything sent has arrived, or the drain timeout.
            drain_until = max(run.plan.end_ns, clock()) + int(w.drain_timeout_s * NS_PER_S)
            if role == "consumer":
                if part is None:
                    while monitor.total_received < monitor.total_sent and clock() < drain_until:
                        _pump(channels, monitor, done, cell.id, listeners)
                else:
                    _drain_hosts(part, channels, monitor, done, cell.id, listeners, drain_until)
            channels.stop.set()
            _await_roles(channels, monitor, listeners, "done", 60.0, cell.id, done)
            _drain_events(channels, monitor)  # the last producers' harness facts may still be queued
            run.harness = monitor.harness
            run.lagging_consumed = sum(monitor.lagging_consumed.values())
            run.relayed = sum(monitor.relayed.values())
            run.background = _background_summary(spec.background, monitor)
    except CellError as exc:
        exc.partial_run = run
        raise
    finally:
        if paused:
            control.resume()
        channels.stop.set()
        _reap(senders + listeners, channels)
    assert run is not None
    return run


def _progress(monitor: LiveMonitor) -> dict[str, int]:
    return {"sent": monitor.total_sent, "received": monitor.total_received}


def _await_hosts_sent(
    part: HostPart, channels: Channels, monitor: LiveMonitor, done: set[str], cell_id: str, procs: list, until: int
) -> None:
    """A host whose producers are done keeps its receivers going until every host's producers are done."""
    part.rendezvous.note("progress", _progress(monitor))
    while len(part.rendezvous.notes("progress")) < len(part.rendezvous.hosts):
        part.rendezvous.check_others()
        if part.clock() > until:
            missing = set(part.rendezvous.hosts) - set(part.rendezvous.notes("progress"))
            raise CellError(cell_id, f"producers of host(s) {', '.join(sorted(missing))} did not finish in time")
        _pump_for(channels, monitor, done, cell_id, procs, _PROGRESS_EVERY_NS, part.clock)
    _say(monitor, part, "every host's producers are done")


def _drain_hosts(
    part: HostPart, channels: Channels, monitor: LiveMonitor, done: set[str], cell_id: str, procs: list, until: int
) -> None:
    """Drain until everything every host sent has been received by some host (each message is received in
    one place: its route's consumers share it), or the drain timeout."""
    while part.clock() < until:
        part.rendezvous.note("progress", _progress(monitor))
        notes = part.rendezvous.notes("progress").values()
        sent, received = sum(n["sent"] for n in notes), sum(n["received"] for n in notes)
        if received >= sent:
            _say(monitor, part, f"all {sent} messages sent by the hosts were received")
            return
        _pump_for(channels, monitor, done, cell_id, procs, _PROGRESS_EVERY_NS, part.clock)
    _say(monitor, part, "drain timeout: the cell counts what has not arrived as lost")


def _say(monitor: LiveMonitor, part: HostPart, what: str) -> None:
    """A host part's step in its log, timed from t0 (the hosts' logs line up by it)."""
    since = (part.clock() - monitor.plan.t0_ns) / NS_PER_S if monitor.plan else 0.0
    monitor.console.print(f"host {part.host} at t0{since:+.1f}s: {what}", highlight=False)


def _pump_for(
    channels: Channels, monitor: LiveMonitor, done: set[str], cell_id: str, procs: list, ns: int, clock: Any
) -> None:
    end = clock() + ns
    while clock() < end:
        _pump(channels, monitor, done, cell_id, procs)


def _background_summary(background: dict[str, Any], monitor: LiveMonitor) -> dict[str, dict]:
    """Per background workload: what its producers scheduled, sent, got acknowledged and had refused, what
    its consumers read, and the send lag over all its processes (one distribution from the merged samples)."""
    out: dict[str, dict] = {}
    for name, bg in background.items():
        if not bg.producers:
            continue
        finals = [e for e in monitor.background_done.values() if e["background"] == name]
        lag = [e["lag_ns"] for e in finals]
        out[name] = {
            **{k: sum(e[k] for e in finals) for k in ("scheduled", "sent", "acked", "errors")},
            "consumed": sum(n for (b, _), n in monitor.background_consumed.items() if b == name),
            "target_rate_per_s": bg.rate_per_s,
            "schedule_lag": summarize(np.concatenate(lag) if lag else np.empty(0, np.int64)).to_dict(),
        }
    return out


def check_cpus(cell: Cell) -> None:
    """Every pinned CPU must exist on this host (and be allowed to this process)."""
    available = os.sched_getaffinity(0)
    for role in ("broker", "producers", "receivers"):
        missing = sorted(set(getattr(cell.spec.workload.cpus, role)) - available)
        if missing:
            raise CellError(
                cell.id,
                f"workload.cpus.{role}: CPU(s) {missing} not available on this host (available: {sorted(available)})",
            )


def _pump(channels: Channels, monitor: LiveMonitor, done: set[str], cell_id: str, procs: list) -> None:
    """Handle every pending event (waiting at most 50 ms for the first), then check worker health."""
    try:
        event = channels.events.get(timeout=0.05)
        while True:
            if event["kind"] == "failed":
                raise CellError(cell_id, f"{event['role']} {event['index']} failed: {event['error']}")
            if event["kind"] == "done":
                done.add(f"{event['role']}-{event['index']}")
            monitor.handle(event)
            event = channels.events.get_nowait()
    except queue.Empty:
        pass
    monitor.refresh()
    for p in procs:
        if p.exitcode is not None and p.exitcode != 0:
            raise CellError(cell_id, f"{p.name} exited with code {p.exitcode}")


def _await_roles(
    channels: Channels,
    monitor: LiveMonitor,
    procs: list,
    kind: str,
    timeout_s: float,
    cell_id: str,
    done: set[str] | None = None,
) -> None:
    """Wait until every process in `procs` has sent an event of `kind`."""
    wanted = {p.name for p in procs}
    seen = (done & wanted) if done is not None else set()  # some may have finished already
    deadline = time.monotonic() + timeout_s
    while not wanted <= seen:
        if time.monotonic() > deadline:
            raise CellError(cell_id, f"timed out waiting for {sorted(wanted - seen)} to be {kind}")
        try:
            event = channels.events.get(timeout=0.05)
        except queue.Empty:
            for p in procs:
                if p.exitcode is not None and p.name not in seen and p.exitcode != 0:
                    raise CellError(cell_id, f"{p.name} exited with code {p.exitcode}") from None
            monitor.refresh()
            continue
        if event["kind"] == "failed":
            raise CellError(cell_id, f"{event['role']} {event['index']} failed: {event['error']}")
        name = f"{event['role']}-{event['index']}"
        if event["kind"] == kind:
            seen.add(name)
        if event["kind"] == "done" and done is not None:
            done.add(name)
        monitor.handle(event)


def _drain_events(channels: Channels, monitor: LiveMonitor) -> None:
    """Hand every event still queued to the monitor (workers are done: nothing more is coming)."""
    with contextlib.suppress(queue.Empty):
        while True:
            monitor.handle(channels.events.get(timeout=0.05))


def _reap(procs: list, channels: Channels) -> None:
    """Join every worker (draining the queue so none blocks on exit), then terminate, then kill."""
    deadline = time.monotonic() + 15
    while any(p.is_alive() for p in procs) and time.monotonic() < deadline:
        with contextlib.suppress(queue.Empty):
            channels.events.get(timeout=0.05)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
