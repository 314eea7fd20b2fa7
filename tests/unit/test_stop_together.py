"""Stopping a cluster's nodes together (`stop_pids` with `last_grace_s`, or a started cluster's `stop` with its
`LAST_NODE_GRACE_S`): the node that outlives every other one is killed `last_grace_s` after they exited, not
after the whole grace. Real processes, no broker."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bench_tasks.brokers.cluster import NodeCluster, stop_pids
from bench_tasks.brokers.process import BrokerProcess, _command_line

MARK = "sixnines-stop-together-test"
EXITS = "import time; time.sleep(60)"  # SIGTERM ends it
WAITS = "import signal, time; signal.signal(signal.SIGTERM, lambda *a: None); print('up', flush=True); time.sleep(60)"


def _node(code: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", code, MARK], stdout=subprocess.PIPE, text=True)
    if "signal" in code:
        assert proc.stdout is not None and proc.stdout.readline() == "up\n"  # its handler is set
    return proc


def test_the_last_node_is_killed_soon_after_the_others_exited() -> None:
    nodes = [_node(EXITS), _node(EXITS), _node(WAITS)]
    pids = [p.pid for p in nodes]
    began = time.monotonic()
    stopped = stop_pids(pids, MARK, grace_s=60, last_grace_s=0.5)
    took = time.monotonic() - began
    assert sorted(stopped) == sorted(pids)
    assert took < 30, took  # the whole grace is 60 s: the last one was not waited for
    assert not any(_running(pid) for pid in pids)  # the one that ignores SIGTERM too: killed (it sleeps 60 s)


def test_without_a_last_grace_a_lone_node_keeps_the_whole_grace() -> None:
    node = _node(WAITS)
    began = time.monotonic()
    assert stop_pids([node.pid], MARK, grace_s=1.0) == [node.pid]
    assert time.monotonic() - began >= 1.0 and not _running(node.pid)


def _running(pid: int) -> bool:
    """Still a live process (stop_pids reaps its children: a pid that is gone or a zombie is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_node_that_has_ended_but_is_not_reaped_is_not_running_rather_than_an_error() -> None:
    """A process that has ended has no command line left to pass the name check: it is counted as gone (a
    RabbitMQ port helper whose VM has just exited is one), not refused as a stranger."""
    node = subprocess.Popen([sys.executable, "-c", "pass", MARK])
    deadline = time.monotonic() + 10
    while psutil.Process(node.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    assert psutil.Process(node.pid).status() == psutil.STATUS_ZOMBIE
    assert stop_pids([node.pid], MARK, grace_s=1.0) == []
    node.wait()


class _Cluster(NodeCluster):
    """Nodes this process started (`BrokerProcess`), stopped like a Kafka cluster is."""

    KIND = "test"
    STOP_GRACE_S = 60.0
    LAST_NODE_GRACE_S = 0.5


def test_a_started_cluster_kills_its_last_node_soon_after_the_others_exited(tmp_path: Path) -> None:
    cluster = _Cluster("0", tmp_path)
    for node_id, code in enumerate((EXITS, EXITS, WAITS), 1):
        cluster.processes[node_id] = BrokerProcess([sys.executable, "-c", code, MARK], tmp_path / f"n{node_id}.log")
    deadline = time.monotonic() + 10
    while "up" not in (tmp_path / "n3.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.02)  # the last node's SIGTERM handler is set
    pids = list(cluster.node_pids.values())
    began = time.monotonic()
    assert sorted(cluster.stop()) == sorted(pids)
    assert time.monotonic() - began < 30  # the whole grace is 60 s: the last one was not waited for
    assert not any(proc.alive() for proc in cluster.processes.values())
    assert cluster.processes[3].popen.returncode == -signal.SIGKILL  # the one that ignores SIGTERM
    assert cluster.processes[1].popen.returncode == -signal.SIGTERM


class _Exiting:
    """A process seen while it exits: its command line reads empty (`empty` times), then it is gone."""

    def __init__(self, empty: int) -> None:
        self.empty = empty

    def cmdline(self) -> list[str]:
        if self.empty == 0:
            raise psutil.NoSuchProcess(0)
        self.empty -= 1
        return []


def test_an_empty_command_line_is_waited_on_until_the_process_is_gone() -> None:
    """The name check reads the command line again while it is empty (a process in the middle of exiting), so
    the process is seen gone rather than refused as a stranger; still empty after the wait, it is returned."""
    with pytest.raises(psutil.NoSuchProcess):
        _command_line(_Exiting(empty=3), exiting_s=2.0)
    assert _command_line(_Exiting(empty=1000), exiting_s=0.1) == []
