"""Stopping a cell's generator by its record (generator.json: PID and start time) signals that generator's
process group and nothing else, whatever now holds the recorded PID: a long session recycles PIDs (pid_max
32768), and a session leader started since (a Celery worker, a detached broker) has a group id equal to its PID."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil

from bench_tasks.cell.detached import generator_alive, generator_group, stop_generator
from bench_tasks.cell.work import CellWork
from bench_tasks.lake.layout import write_json
from tests.processes import LEAVES_A_CHILD


def _record(work: CellWork, pid: int, create_time: float) -> dict:
    known = {"pid": pid, "create_time": create_time}
    write_json(work.generator, known)
    return known


def test_a_recorded_pid_now_held_by_another_session_leader_is_left_alone(tmp_path: Path) -> None:
    """The generator that had this PID ended long ago; a session leader (its own group, as the generator was) got
    the number since. Neither it nor its group is the generator's."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        work = CellWork(tmp_path)
        known = _record(work, other.pid, psutil.Process(other.pid).create_time() - 100)
        assert not generator_alive(work, known)
        assert generator_group(known) == []
        assert stop_generator(work, grace_s=1) == []
        assert other.poll() is None  # neither SIGTERMed nor SIGKILLed
    finally:
        other.kill()
        other.wait()


def test_the_members_a_gone_generator_left_in_its_group_are_killed(tmp_path: Path) -> None:
    leader = subprocess.Popen([sys.executable, "-c", LEAVES_A_CHILD], start_new_session=True)
    create_time = psutil.Process(leader.pid).create_time()
    leader.wait(timeout=30)
    work = CellWork(tmp_path)
    known = _record(work, leader.pid, create_time)
    (member,) = generator_group(known)
    assert member.cmdline() == ["sleep", "60"]
    assert stop_generator(work, grace_s=1) == [member.pid]
    # gone by the time stop_generator returns (teardown checks for survivors right after it), or a zombie
    assert not member.is_running() or member.status() == psutil.STATUS_ZOMBIE


def test_a_running_generator_is_sent_sigterm(tmp_path: Path) -> None:
    generator = subprocess.Popen(["sleep", "60"], start_new_session=True)
    work = CellWork(tmp_path)
    _record(work, generator.pid, psutil.Process(generator.pid).create_time())
    assert stop_generator(work, grace_s=10) == [generator.pid]
    assert not psutil.pid_exists(generator.pid)  # ended, and reaped by stop_generator (our child here)
    generator.wait(timeout=10)  # Popen says 0 of a child reaped by another waiter: the status is not its to see
