"""Drive one cell on running brokers: routes, workers, the schedule (with faults on its clock), drain — one run.

The parent only orchestrates; every timestamp of a message is taken in a worker. Load runs without a gap from
warmup start to cooldown end: phases are cut afterwards by intended time. Whatever happens, no worker process
outlives the drive. The same steps serve every entry point (the CLI, the detached generator under Airflow, one
real host's part); what differs between one machine and one host of many sits behind `coordination`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from ..core.percentiles import summarize
from ..core.schedule import NS_PER_S, PhasePlan
from ..errors import CellError, SixninesError
from ..load import cpushare
from ..load.drivers import driver_for, routes
from ..load.live import LiveMonitor
from ..load.loop import run_precise
from ..load.plan import WorkerPlan
from ..load.routes import MEASURED, Target, final_route
from ..spec.matrix_model import Cell
from ..systems import system_of
from ..topology.netns import inside
from ..topology.plan import PlacementPlan
from ..topology.rendezvous import HostPart
from .brokerwatch import BrokerWatch, Finding
from .coordination import Coordinator, coordinator_for
from .faults import BrokerControl, Fault, FaultInjector, FiredFault, faults_of
from .workers import Workers

READY_TIMEOUT_S = 60.0
# The longest t0 waits for the leader watch's first answer on the measured route (it polls every 0.25 s, from
# before the route exists): with t0 50 ms after the workers were ready, a 3-node quorum queue's first samples came
# before it and had no leader (seen on a loaded host).
LEADERS_KNOWN_S = 5.0
DONE_TIMEOUT_S = 60.0

__all__ = ["CellRun", "Driven", "Fault", "FiredFault", "check_cpus", "drive"]


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
    workers_ready_s: float | None = None  # from asking for the workers until every one was ready

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
            "workers_ready_s": self.workers_ready_s,
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
            facts.get("workers_ready_s"),
        )


@dataclass
class Driven:
    """How a cell's schedule ended: the run so far (None if it never started), and the first failure."""

    run: CellRun | None
    status: str = "ok"
    reason: str | None = None


def drive(
    cell: Cell,
    plan: PlacementPlan,
    target: Target | str,
    staging: Path,
    control: BrokerControl,
    console: Console,
    faults: Sequence[Fault] = (),
    on_status: Callable[[LiveMonitor], None] | None = None,
    part: HostPart | None = None,
    watch: BrokerWatch | None = None,
    leaders_known: Callable[[float], bool] | None = None,
) -> Driven:
    """Run the cell's whole schedule against the brokers; a failed cell is a result, never an exception, and
    keeps whatever ran. `target`: the brokers' address, or a Target carrying client security settings and route
    names too. `plan`: where the cell runs (each worker in its host's network namespace, if it has one, on its
    clock domain's route). With a host part, only this host's workers run, on the host clock, starting when all
    hosts agree (`coordination`). `watch`: the brokers' watch (`brokerwatch`); what it finds fails the cell, first
    among its reasons, and is a fault record on its timeline. `leaders_known(timeout_s)`: waits until the brokers'
    leader watch has named the measured route's leader; t0 is fixed after it."""
    target = target if isinstance(target, Target) else Target(target)
    watch = watch if watch is not None else BrokerWatch()
    cell_drive = CellDrive(
        cell, plan, target, staging, control, console, faults, on_status, coordinator_for(part), watch, leaders_known
    )
    try:
        driven = Driven(cell_drive.run_schedule())
    except CellError as exc:
        driven = Driven(cell_drive.run, "failed", str(exc))
    except Exception as exc:  # recorded, never lost: land reports it as the cell's reason
        text = str(exc) if isinstance(exc, SixninesError) else f"{type(exc).__name__}: {exc}"
        driven = Driven(cell_drive.run, "failed", text if cell.id in text else f"cell {cell.instance}: {text}")
    finally:
        watch.tick(cell_drive.coord.clock(), force=True)  # a broker gone since the last look, however it ended
        watch.stop()
    return with_findings(driven, watch.findings(), cell.instance)


def with_findings(driven: Driven, findings: Sequence[Finding], instance: str) -> Driven:
    """The drive's outcome with what the broker watch found: each finding a fault record (kind `undeclared-…`)
    in the run, the cell failed, the findings its reason before any other (a broker gone is why producers then
    failed, not the other way round)."""
    if not findings:
        return driven
    run = driven.run
    if run is not None:
        run.faults.extend(_record(f) for f in findings)
    said = "; ".join(f"{f.what} at {_on_clock(f.at_ns, run)}, and no fault was declared" for f in findings)
    reason = f"cell {instance}: {said}" + (f"; then: {driven.reason}" if driven.reason else "")
    return Driven(run, "failed", reason)


def _record(finding: Finding) -> FiredFault:
    ends = None if finding.kind == "undeclared-stop" else finding.at_ns  # an exit is an instant, as a kill is
    return FiredFault(finding.kind, finding.at_ns, ends, "undeclared", finding.node, detail=finding.what)


def _on_clock(at_ns: int, run: CellRun | None) -> str:
    """A moment on the cell's clock, from t0 and from the measure phase's start."""
    if run is None:
        return "before the schedule started"
    since_t0, since_measure = (at_ns - run.plan.t0_ns) / NS_PER_S, (at_ns - run.plan.measure_start_ns) / NS_PER_S
    return f"t0{since_t0:+.3f} s (measure {since_measure:+.3f} s)"


def receiver_role(cell: Cell) -> str | None:
    return {"e2e": "consumer", "chain": "consumer", "rtt": "responder", "publish": None}[cell.spec.measurement]


@dataclass
class Groups:
    """The cell's worker processes by what they do, in the order they start (downstream first)."""

    receivers: list[Any]
    relays: list[Any]
    readers: list[Any]  # lagging and background consumers: unmeasured
    senders: list[Any]  # measured producers, then background producers

    @property
    def listeners(self) -> list[Any]:
        return self.receivers + self.relays + self.readers


class CellDrive:
    """One cell's run, step by step: routes, workers, schedule, drain, collect. `run` holds the run as far as it
    got, so a failure at any step still lands what was measured."""

    def __init__(
        self,
        cell: Cell,
        plan: PlacementPlan,
        target: Target,
        staging: Path,
        control: BrokerControl,
        console: Console,
        faults: Sequence[Fault],
        on_status: Callable[[LiveMonitor], None] | None,
        coordinator: Coordinator,
        watch: BrokerWatch,
        leaders_known: Callable[[float], bool] | None = None,
    ):
        self.cell, self.target, self.staging, self.control = cell, target, staging, control
        self.watch, self.leaders_known = watch, leaders_known
        self.faults = [*faults, *faults_of(cell.spec.faults)]  # a caller's (calibrate) and the matrix's
        self.plan, self.coord = plan, coordinator
        self.names = target.names or cell.instance
        w = cell.spec.workload
        self.phase_ns = (int(w.warmup_s * NS_PER_S), int(w.measure_s * NS_PER_S), int(w.cooldown_s * NS_PER_S))
        self.monitor = LiveMonitor(coordinator.label(cell), cell.spec.measurement, console, on_status)
        self.monitor.clock = coordinator.clock
        self.run: CellRun | None = None

    def run_schedule(self) -> CellRun:
        check_cpus(self.cell)
        self.watch.start(self.coord.clock)
        self.coord.prepare_routes(self._prepare_routes)
        offsets = self.coord.clock_offsets(self.cell, self.plan.topology)
        workers = Workers(self.cell.id, self.monitor, self.phase_ns)
        workers.on_pump = lambda: self.watch.tick(self.coord.clock())  # every loop of the cell pumps events
        groups = self._spawn(workers)
        injector: FaultInjector | None = None
        try:
            with self.monitor:
                # All at once, receivers first: a sender sends nothing before t0, fixed once every worker is ready.
                # One group after another cost a worker's start-up per group: a Kafka cell's workers were ready in
                # 0.91 s, at once in 0.45 s (bench/cell_overhead.py, quick sweep).
                everyone = [*groups.receivers, *groups.relays, *groups.readers, *groups.senders]
                workers.start(everyone, READY_TIMEOUT_S)
                if self.leaders_known is not None:
                    self.leaders_known(LEADERS_KNOWN_S)  # none named in time: the first samples have no leader
                run = self._begin(workers, offsets)
                injector = FaultInjector(
                    self.faults,
                    self.control,
                    run.plan.measure_start_ns,
                    self.coord.clock,
                    run.faults,
                    self.cell.spec.workload.seed,
                    self.watch,
                    self.plan.node_links(),
                    workers,
                )
                self._send(workers, groups, injector, run)
                self._drain(workers, groups, run)
                self._collect(workers, groups, run)
        finally:
            if injector is not None:
                injector.close()
            workers.reap()
            if cpu_shares(self.cell):
                cpushare.release(self.cell.id)
        return run

    # -- routes ------------------------------------------------------------------------------------------------
    def _prepare_routes(self) -> None:
        """Create the measured route, a chain's second hop, background ones (external brokers: provision made
        them), and write a prefill backlog; from the broker's side of the network."""
        spec, target = self.cell.spec, self.target
        all_routes = {**routes(spec), **dict.fromkeys(self.plan.routes, spec)}  # + one per clock domain
        drivers = {r: driver_for(target.address, s, self.names, r, target.client) for r, s in all_routes.items()}
        with inside(self.plan.broker_netns):
            run_precise(self._prepare(drivers))

    async def _prepare(self, drivers: dict[str, Any]) -> None:
        w = self.cell.spec.workload
        try:
            for route_driver in drivers.values():
                if not self.target.prepared:
                    await route_driver.prepare()
            if w.prefill_messages:
                await drivers[MEASURED].prefill(w.prefill_messages, w.message_size_bytes, self._prefill_progress)
        finally:
            for route_driver in drivers.values():
                await route_driver.close()

    def _prefill_progress(self, done: int) -> None:
        w = self.cell.spec.workload
        total, step = w.prefill_messages, max(1, w.prefill_messages // 10)
        if done % step < 10_000 or done == total:  # about every 10 %
            self.monitor.console.print(f"prefill: {done}/{total} messages of {w.message_size_bytes} B", highlight=False)

    # -- workers -----------------------------------------------------------------------------------------------
    def _spawn(self, workers: Workers) -> Groups:
        spec, w = self.cell.spec, self.cell.spec.workload
        role = receiver_role(self.cell)
        receivers = [self._worker(workers, role, i, final_route(spec)) for i in self._mine(role, w.consumers)]
        chain = w.relays if spec.measurement == "chain" else 0
        relays = [self._worker(workers, "relay", i) for i in self._mine("relay", chain)]
        laggards = [self._worker(workers, "laggard", i) for i in self._mine("laggard", w.lagging_consumers)]
        active = [(name, bg) for name, bg in spec.background.items() if bg.producers]
        parts = [(name, k) for name, bg in active for k in range(bg.processes)]
        background = [self._worker(workers, "background", i, background=n, part=k) for i, (n, k) in enumerate(parts)]
        readers = [(name, s) for name, bg in active for s in range(bg.subscriptions) for _ in range(bg.consumers)]
        bg_consumers = [
            self._worker(workers, "bg_consumer", i, background=n, subscription=s) for i, (n, s) in enumerate(readers)
        ]
        producers = [self._worker(workers, "producer", i) for i in self._mine("producer", w.producers)]
        return Groups(receivers, relays, laggards + bg_consumers, producers + background)

    def _mine(self, role: str | None, count: int) -> list[int]:
        """The indexes of `role` that run here (all of them on one machine; a host part's own)."""
        return [i for i in range(count) if role and self.coord.runs_here(self.plan, role, i)]

    def _worker(self, workers: Workers, role: str, index: int, route: str = MEASURED, **extra: Any) -> Any:
        w = self.cell.spec.workload
        cpus = w.cpus.producers if role in ("producer", "background") else w.cpus.receivers
        plan = WorkerPlan(
            role,
            index,
            self.target.address,
            self.cell.instance,
            self.cell.spec.model_dump_json(),
            str(Path(self.staging).resolve()),  # a forked worker's cwd is its fork server's, not ours
            tuple(cpus),
            self.plan.worker_route(role, index, route),
            client=dict(self.target.client),
            names=self.names,
            netns=self.plan.worker_netns(role, index),
            clock_shift_ns=self.coord.clock_shift_ns,
            cpu_share=w.cpus.share(role),
            **extra,
        )
        return workers.process(plan, system_of(self.cell.spec).worker_program(self.cell.spec, role))

    # -- schedule ----------------------------------------------------------------------------------------------
    def _begin(self, workers: Workers, offsets: list[dict[str, Any]]) -> CellRun:
        """Fix t0 for every producer: the schedule starts for all of them at once."""
        t0, wall_t0_s = self.coord.start_at()
        workers.begin(t0)
        self.run = CellRun(
            PhasePlan(t0, *self.phase_ns),
            wall_t0_s,
            self.staging,
            clock_offsets=offsets,
            workers_ready_s=round(workers.ready_s, 3),
        )
        self.monitor.plan = self.run.plan
        return self.run

    def _send(self, workers: Workers, groups: Groups, injector: FaultInjector, run: CellRun) -> None:
        """Until every sender is done, pumping events and ticking the fault injector on the cell's clock."""
        w = self.cell.spec.workload
        finish_by = run.plan.end_ns + int((w.request_timeout_s + 30) * NS_PER_S)
        senders = {p.name for p in groups.senders}
        while not senders <= workers.done:
            workers.pump(groups.senders + groups.listeners)
            now = self.coord.clock()
            injector.tick(now)
            if now > finish_by:
                raise CellError(self.cell.id, self._unfinished(run, now))
        self.coord.after_sending(workers, groups.listeners, finish_by)

    def _unfinished(self, run: CellRun, now: int) -> str:
        """Why the schedule could not end in time, with what the senders achieved. Open loop, the load was not
        offered: the generator fell behind (a harness verdict, as the landing gate's lag gives it). For rtt the
        requesters are synchronous, so `connections` round trips in flight carry at most connections / round trip
        per second: the system's pace, not the harness's."""
        w = self.cell.spec.workload
        elapsed_s = max((now - run.plan.t0_ns) / NS_PER_S, 1e-9)
        achieved = self.monitor.total_sent / elapsed_s
        why = f"producers did not finish their schedule in time: {achieved:,.0f} sent/s of {w.rate_per_s:,.0f} offered"
        if self.cell.spec.measurement != "rtt":  # open loop: the load was not offered, as the landing gate's lag says
            return f"generator fell behind its schedule: {why}"
        streams = w.producers * w.connections
        return (
            f"{why}; {streams} synchronous requesters carry at most {streams} / round trip, so round trips took "
            f"≈ {streams / max(achieved, 1e-9) * 1e3:.2f} ms on average: more connections or a lower rate"
        )

    def _drain(self, workers: Workers, groups: Groups, run: CellRun) -> None:
        """Wait for stragglers until everything sent has arrived, or the drain timeout."""
        w = self.cell.spec.workload
        if receiver_role(self.cell) == "consumer":
            until = max(run.plan.end_ns, self.coord.drain_from(self.monitor)) + int(w.drain_timeout_s * NS_PER_S)
            self.coord.drain(workers, groups.listeners, until)
        workers.stop()
        workers.await_roles(groups.listeners, "done", DONE_TIMEOUT_S)

    def _collect(self, workers: Workers, groups: Groups, run: CellRun) -> None:
        workers.drain_events()  # the last producers' harness facts may still be queued
        run.harness = self.monitor.harness
        run.lagging_consumed = sum(self.monitor.lagging_consumed.values())
        run.relayed = sum(self.monitor.relayed.values())
        run.background = _background_summary(self.cell.spec.background, self.monitor)


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
            "consumed": sum(n for (b, _, _), n in monitor.background_consumed.items() if b == name),
            **_per_subscription(name, bg.subscriptions, monitor),
            "target_rate_per_s": bg.rate_per_s,
            "schedule_lag": summarize(np.concatenate(lag) if lag else np.empty(0, np.int64)).to_dict(),
        }
    return out


def _per_subscription(name: str, subscriptions: int, monitor: LiveMonitor) -> dict[str, list[int]]:
    """With several subscriptions, what each consumer group read (every message is each group's to read)."""
    if subscriptions < 2:
        return {}
    read = [0] * subscriptions
    for (b, s, _), n in monitor.background_consumed.items():
        if b == name:
            read[s] += n
    return {"consumed_per_subscription": read}


def cpu_shares(cell: Cell) -> list[str]:
    """The `workload.cpus` shares the cell sets."""
    cpus = cell.spec.workload.cpus
    return [f for f in ("producers_share", "receivers_share") if getattr(cpus, f) is not None]


def check_cpus(cell: Cell) -> None:
    """Every pinned CPU must exist on this host (and be allowed to this process); a CPU share needs cgroups."""
    for share in cpu_shares(cell):
        why = cpushare.unavailable()
        if why is not None:
            raise CellError(cell.id, f"workload.cpus.{share}: cannot cap a worker's CPU time here: {why}")
    available = os.sched_getaffinity(0)
    for role in ("broker", "producers", "receivers"):
        missing = sorted(set(getattr(cell.spec.workload.cpus, role)) - available)
        if missing:
            raise CellError(
                cell.id,
                f"workload.cpus.{role}: CPU(s) {missing} not available on this host (available: {sorted(available)})",
            )
