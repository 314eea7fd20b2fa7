"""The fault injector on an injected clock: each fault fires at its time into the cell run's own list, a stall is
thawed when it has lasted, and `close` thaws one still frozen."""

from __future__ import annotations

from bench_tasks.cell.faults import Fault, FaultInjector, FiredFault

S = 1_000_000_000


class Signals:
    """What the injector asked of the brokers, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def fault_nodes(self) -> list[int]:
        return [1, 2, 3]

    def fault_leader(self) -> int:
        return 2

    def fault_controller(self) -> int:
        return 3

    def pause_node(self, node: int) -> None:
        self.calls.append("pause")

    def resume_node(self, node: int) -> None:
        self.calls.append("resume")

    def kill_node(self, node: int) -> None:
        self.calls.append("kill")

    def restart_node(self, node: int) -> int:
        self.calls.append(f"restart {node}")
        return 4242


def test_faults_fire_on_time_into_the_runs_list() -> None:
    now = [0]
    signals, fired = Signals(), list[FiredFault]()
    injector = FaultInjector([Fault("stall", 1.0, 0.5), Fault("kill", 3.0)], signals, 10 * S, lambda: now[0], fired)
    for t in (10.5, 11.0, 11.2, 11.5, 13.0):
        now[0] = int(t * S)
        injector.tick(now[0])
    assert signals.calls == ["pause", "resume", "kill"]
    assert fired is injector.fired
    assert [(f.kind, f.start_ns, f.end_ns) for f in fired] == [
        ("stall", 11 * S, int(11.5 * S)),
        ("kill", 13 * S, 13 * S),
    ]


def test_close_thaws_a_stall_still_frozen() -> None:
    signals = Signals()
    injector = FaultInjector([Fault("stall", 0.0, 60.0)], signals, 0, lambda: 0, [])
    injector.tick(0)
    injector.close()
    assert signals.calls == ["pause", "resume"] and injector.fired[0].end_ns == 0


def test_each_fault_records_its_target_and_the_node_it_hit() -> None:
    now = [0]
    fired: list[FiredFault] = []
    faults = [Fault("stall", 1.0, 0.5, "node:3"), Fault("kill", 2.0, target="leader")]
    injector = FaultInjector(faults, Signals(), 0, lambda: now[0], fired, seed=5)
    for t in (1.0, 1.5, 2.0):
        now[0] = int(t * S)
        injector.tick(now[0])
    assert [(f.kind, f.target, f.node, f.at_s, f.duration_s) for f in fired] == [
        ("stall", "node:3", 3, 1.0, 0.5),
        ("kill", "leader", 2, 2.0, None),
    ]


def test_a_restart_ends_when_the_node_was_started_again() -> None:
    now = [0]
    signals, fired = Signals(), list[FiredFault]()
    injector = FaultInjector([Fault("restart", 1.0, target="node:1")], signals, 0, lambda: now[0], fired)
    now[0] = S
    injector.tick(S)
    assert signals.calls == ["restart 1"]
    assert (fired[0].kind, fired[0].node, fired[0].start_ns, fired[0].end_ns) == ("restart", 1, S, S)


def test_a_stall_starts_when_the_node_is_frozen_not_when_it_was_asked() -> None:
    """SIGSTOP takes effect over milliseconds on a busy host; the stall's clock starts once every thread stopped."""
    now = [S]

    class SlowToFreeze(Signals):
        def pause_node(self, node: int) -> None:
            super().pause_node(node)
            now[0] += 5_000_000  # 5 ms until the node is frozen

    fired: list[FiredFault] = []
    injector = FaultInjector([Fault("stall", 1.0, 0.5)], SlowToFreeze(), 0, lambda: now[0], fired)
    injector.tick(S)
    assert fired[0].start_ns == S + 5_000_000
    now[0] = S + 5_000_000 + S // 2
    injector.tick(now[0])
    assert fired[0].end_ns == now[0]


class WorkerSignals:
    """What the injector asked of the cell's workers, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause_worker(self, name: str) -> None:
        self.calls.append(f"pause {name}")

    def resume_worker(self, name: str, paused_at_ns: int) -> None:
        self.calls.append(f"resume {name} paused at {paused_at_ns}")

    def kill_worker(self, name: str) -> None:
        self.calls.append(f"kill {name}")


def test_a_fault_aimed_at_a_worker_signals_the_worker_not_a_broker() -> None:
    now = [0]
    brokers, workers, fired = Signals(), WorkerSignals(), list[FiredFault]()
    faults = [Fault("stall", 1.0, 0.5, "worker:relay-0"), Fault("kill", 2.0, target="worker:relay-0")]
    injector = FaultInjector(faults, brokers, 0, lambda: now[0], fired, workers=workers)
    for t in (1.0, 1.5, 2.0):
        now[0] = int(t * S)
        injector.tick(now[0])
    assert brokers.calls == []
    assert workers.calls == ["pause relay-0", f"resume relay-0 paused at {S}", "kill relay-0"]
    assert [(f.kind, f.target, f.node, f.start_ns, f.end_ns) for f in fired] == [
        ("stall", "worker:relay-0", None, S, int(1.5 * S)),
        ("kill", "worker:relay-0", None, 2 * S, 2 * S),
    ]
