"""The broker watch on real processes (`sleep` standing in for a broker node): what it reports of a node that
exits, freezes or is replaced with no fault declared, and that a declared fault is never reported."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from bench_tasks.cell import brokerwatch
from bench_tasks.cell.brokerwatch import EndpointWatch, NodeWatch, endpoints_of


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen]]:
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def _sleep(sleepers: list[subprocess.Popen], argv: tuple[str, ...] = ("sleep", "60")) -> int:
    sleepers.append(subprocess.Popen(argv))
    return sleepers[-1].pid


def _until_zombie(pid: int) -> None:
    deadline = time.monotonic() + 5
    while brokerwatch.read_stat(pid).state not in "ZX" and time.monotonic() < deadline:  # type: ignore[union-attr]
        time.sleep(0.01)


def _watch(pids: dict[int, int]) -> NodeWatch:
    watch = NodeWatch(pids, "sleep")
    watch.start(time.monotonic_ns)
    return watch


def test_a_node_killed_from_outside_is_reported_with_its_signal(sleepers: list[subprocess.Popen]) -> None:
    pids = {1: _sleep(sleepers), 2: _sleep(sleepers)}
    watch = _watch(pids)
    watch.tick(time.monotonic_ns())
    assert watch.findings() == []
    before = time.monotonic_ns()
    os.kill(pids[2], signal.SIGKILL)
    _until_zombie(pids[2])
    watch.tick(time.monotonic_ns(), force=True)
    watch.tick(time.monotonic_ns(), force=True)  # reported once
    (found,) = watch.findings()
    assert (found.kind, found.node) == ("undeclared-exit", 2)
    assert found.what == f"broker node 2 (sleep pid {pids[2]}) killed by SIGKILL"
    assert found.at_ns >= before


def test_a_companion_the_nodes_need_is_watched_like_a_node(sleepers: list[subprocess.Popen]) -> None:
    """A ZooKeeper-era Kafka cluster's ZooKeeper is no fault's target: its exit is always undeclared, and named."""
    node, companion = _sleep(sleepers), _sleep(sleepers)
    watch = NodeWatch({1: node}, "sleep", {companion: "QuorumPeerMain"})
    watch.start(time.monotonic_ns)
    watch.declare_exit(1)  # a declared fault on the node does not cover its companion
    os.kill(companion, signal.SIGKILL)
    _until_zombie(companion)
    watch.tick(time.monotonic_ns(), force=True)
    watch.tick(time.monotonic_ns(), force=True)  # reported once
    (found,) = watch.findings()
    assert (found.kind, found.node) == ("undeclared-exit", None)
    assert found.what == f"QuorumPeerMain (pid {companion}), which the nodes need, killed by SIGKILL"


def test_a_tick_held_up_before_it_looks_dates_the_exit_when_it_was_seen(sleepers: list[subprocess.Popen]) -> None:
    """The tick's own time was read before the host held it up; the kill came in between. The exit is dated when
    the look saw it, never before the signal was sent (a clean-clone CI run had it 195 ms early)."""
    pid = _sleep(sleepers)
    watch = _watch({0: pid})
    tick_began = time.monotonic_ns()
    killed = time.monotonic_ns()
    os.kill(pid, signal.SIGKILL)
    _until_zombie(pid)
    watch.tick(tick_began, force=True)
    (found,) = watch.findings()
    assert found.kind == "undeclared-exit" and found.at_ns >= killed


def test_an_exit_status_is_reported(sleepers: list[subprocess.Popen]) -> None:
    pid = _sleep(sleepers, ("sh", "-c", "sleep 0.2; exit 3"))
    watch = NodeWatch({0: pid}, "sh")
    watch.start(time.monotonic_ns)
    _until_zombie(pid)
    watch.tick(time.monotonic_ns())
    (found,) = watch.findings()
    assert found.what.endswith("exited with status 3")


def test_declared_kill_and_restart_are_not_reported(sleepers: list[subprocess.Popen]) -> None:
    pids = {1: _sleep(sleepers), 2: _sleep(sleepers)}
    watch = _watch(pids)
    watch.declare_exit(1)  # a declared kill: told before the signal
    os.kill(pids[1], signal.SIGKILL)
    watch.declare_exit(2)  # a declared restart: killed, then started again under a new PID
    os.kill(pids[2], signal.SIGKILL)
    restarted = _sleep(sleepers)
    watch.declare_replaced(2, restarted)
    _until_zombie(pids[1])
    _until_zombie(pids[2])
    watch.tick(time.monotonic_ns(), force=True)
    assert watch.findings() == []
    os.kill(restarted, signal.SIGTERM)  # the restarted node then dies with no fault declared
    _until_zombie(restarted)
    watch.tick(time.monotonic_ns(), force=True)
    (found,) = watch.findings()
    assert found.what == f"broker node 2 (sleep pid {restarted}) killed by SIGTERM"


def test_a_node_frozen_outside_a_declared_stall_is_reported(
    sleepers: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(brokerwatch, "STOPPED_FOR_NS", 200_000_000)
    pids = {1: _sleep(sleepers), 2: _sleep(sleepers)}
    watch = _watch(pids)
    watch.declare_stall(1)
    for pid in pids.values():
        os.kill(pid, signal.SIGSTOP)
    first = time.monotonic_ns()
    while time.monotonic_ns() - first < 400_000_000:
        watch.tick(time.monotonic_ns(), force=True)
        time.sleep(0.02)
    (found,) = watch.findings()
    assert (found.kind, found.node) == ("undeclared-stop", 2)
    assert "was frozen (state T)" in found.what
    assert found.at_ns - first < 100_000_000  # from when it was first seen frozen


def test_a_pid_taken_by_another_process_is_a_replacement(sleepers: list[subprocess.Popen]) -> None:
    pid = _sleep(sleepers)
    watch = _watch({0: pid})
    watch.nodes[0].start_ticks = -1  # as if the node had started at another time: its PID is someone else's
    watch.tick(time.monotonic_ns())
    (found,) = watch.findings()
    assert found.kind == "undeclared-replaced"


def test_an_external_endpoint_that_stops_accepting_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokerwatch, "PROBE_EVERY_S", 0.05)
    accepted: list[int] = []  # when each probe the listener accepted returned

    def probe(host: str, port: int) -> str | None:
        problem = real_probe(host, port)
        if problem is None:
            accepted.append(time.monotonic_ns())
        return problem

    real_probe = brokerwatch.probe
    monkeypatch.setattr(brokerwatch, "probe", probe)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    watch = EndpointWatch([("127.0.0.1", port)])
    watch.start(time.monotonic_ns)
    try:
        time.sleep(0.2)
        assert watch.findings() == []
        listener.close()
        deadline = time.monotonic() + 5
        while not watch.findings() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = time.monotonic_ns()
    finally:
        watch.stop()
    (found,) = watch.findings()
    assert (found.kind, found.node) == ("undeclared-unreachable", None)
    assert f"external broker 127.0.0.1:{port} stopped accepting connections" in found.what
    # dated by the first refused probe's start: after the last accepted one (a probe begun just before the close
    # can be the first refused), and before the watch reported it
    assert accepted and max(accepted) <= found.at_ns <= seen


def test_endpoints_of_addresses() -> None:
    assert endpoints_of("nats://u:p@127.0.0.1:4222") == [("127.0.0.1", 4222)]
    assert endpoints_of("h1:9092, h2:9093") == [("h1", 9092), ("h2", 9093)]
    assert endpoints_of("amqps://[::1]:5671/vhost") == [("::1", 5671)]
    assert endpoints_of("redis://host") == []  # no port: the client's default, not guessed


def test_an_endpoint_refusing_when_the_cell_ends_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokerwatch, "PROBE_EVERY_S", 0.05)
    monkeypatch.setattr(brokerwatch, "PROBES_IN_A_ROW", 1000)  # the cell ends before the probes in a row are done
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    watch = EndpointWatch([("127.0.0.1", port)])
    watch.start(time.monotonic_ns)
    listener.close()
    time.sleep(0.3)
    assert watch.findings() == []
    watch.stop()
    (found,) = watch.findings()
    assert found.kind == "undeclared-unreachable"


def test_the_report_says_what_happened_to_a_node_nobody_faulted() -> None:
    from bench_tasks.report.cell_view import fault_costs_records, markers
    from bench_tasks.report.data import CellData

    what = "broker node 0 (nats-server pid 7) killed by SIGKILL"
    record = {"kind": "undeclared-exit", "start_ns": 3_000_000_000, "end_ns": 3_000_000_000, "node": 0}
    record |= {"target": "undeclared", "detail": what, "fired_s": 1.0, "ended_s": 1.0, "lost": 9}
    cell = CellData(None, None, {"faults": [record], "phases": {"t0_ns": 0}}, None)  # type: ignore[arg-type]
    (row,) = fault_costs_records(cell)
    assert (row["action"], row["what happened (a fault nobody declared)"], row["lost"]) == ("undeclared-exit", what, 9)
    assert [m.label for m in markers(cell)] == ["undeclared-exit node 0 0.00 s"]  # a band on the timeline


def test_a_watch_never_started_reports_nothing(sleepers: list[subprocess.Popen]) -> None:
    watch = NodeWatch({0: _sleep(sleepers)}, "sleep")  # the cell failed before its brokers were watched
    watch.tick(time.monotonic_ns(), force=True)
    assert watch.findings() == []
