"""A cell-part worker's idle group (tests/cell_priority.py) on this host's cgroups: the watcher switches it idle
exactly while a cell taken by a process outside the group holds the lease; an idle group gives a CPU away; and
`give_way` moves its caller in, and the group goes once the caller has ended."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.cell_priority import PREFIX, _make_group, unavailable

REPO = Path(__file__).resolve().parents[2]
WHY_NOT = unavailable()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"no idle cgroup here: {WHY_NOT}")


def _eventually(check: Callable[[], bool], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = [subprocess.Popen(["sleep", "120"]) for _ in range(2)]
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


def _cell_lease(lease: Path, taker_pid: int, since: str) -> None:
    taker = {"pid": taker_pid, "create_time": psutil.Process(taker_pid).create_time()}
    lease.write_text(json.dumps({"work": f"/runs/r/{since}", "cell": since, "since": since, "taker": taker}))


def test_the_group_is_idle_only_while_another_groups_cell_holds_the_host(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    member, outsider = sleepers
    group = _make_group(f"{PREFIX}test-{os.getpid()}")
    (group / "cgroup.procs").write_text(str(member.pid))
    lease = tmp_path / "host.lease"
    watch_me = [str(member.pid), str(group), str(lease)]
    watcher = subprocess.Popen([sys.executable, "-m", "tests.cell_priority", *watch_me], cwd=REPO)
    try:
        steps: list[tuple[str, Callable[[], None], str]] = [
            ("another's cell", lambda: _cell_lease(lease, outsider.pid, "1"), "1"),
            ("analyses", lambda: lease.write_text(json.dumps({"analyses": [{"run": "r"}]})), "0"),
            ("another's next cell", lambda: _cell_lease(lease, outsider.pid, "2"), "1"),
            ("a free host", lease.unlink, "0"),
            ("another's third cell", lambda: _cell_lease(lease, outsider.pid, "3"), "1"),
            ("the group's own cell", lambda: _cell_lease(lease, member.pid, "4"), "0"),
            ("another's fourth cell", lambda: _cell_lease(lease, outsider.pid, "5"), "1"),
        ]
        for name, make, idle in steps:
            make()
            assert _eventually(lambda idle=idle: (group / "cpu.idle").read_text().strip() == idle), (name, idle)
        member.kill()
        member.wait()
        assert watcher.wait(timeout=20) == 0
        assert not group.exists()
    finally:
        watcher.kill()
        watcher.wait()
        if group.exists():
            group.rmdir()


def test_an_idle_group_leaves_a_cpu_to_a_thread_outside_it() -> None:
    """Two busy loops on one CPU, one in an idle group: the other gets nearly all of it (the kernel's weights are
    1024 to 3). The other runs in a normal group of its own: this test's worker may itself be in a group that
    gives way to cells (`make test` runs this part beside them)."""
    group = _make_group(f"{PREFIX}spin-{os.getpid()}")
    normal = _make_group(f"{PREFIX}spin-normal-{os.getpid()}")
    (group / "cpu.idle").write_text("1")
    cpu = sorted(os.sched_getaffinity(0))[-1]
    spin = ["taskset", "-c", str(cpu), sys.executable, "-c", "while True: pass"]
    idle, busy = subprocess.Popen(spin), subprocess.Popen(spin)
    try:
        (group / "cgroup.procs").write_text(str(idle.pid))
        (normal / "cgroup.procs").write_text(str(busy.pid))
        start = {p.pid: psutil.Process(p.pid).cpu_times().user for p in (idle, busy)}
        time.sleep(1.5)
        used = {p.pid: psutil.Process(p.pid).cpu_times().user - start[p.pid] for p in (idle, busy)}
    finally:
        (group / "cpu.idle").write_text("0")  # a killed process must run to exit: idle, it may wait in a busy suite
        for proc in (busy, idle):
            proc.kill()
            proc.wait()
        for made in (group, normal):
            assert _eventually(lambda made=made: not (made / "cgroup.procs").read_text().split())
            made.rmdir()
    assert used[busy.pid] > 10 * used[idle.pid], used


def test_give_way_moves_its_caller_in_and_the_group_goes_after_it(tmp_path: Path) -> None:
    script = (
        "import os\nfrom pathlib import Path\nfrom tests.cell_priority import give_way\n"
        f"group = give_way(Path({str(tmp_path / 'host.lease')!r}))\n"
        "print(group, (group / 'cgroup.procs').read_text().split() == [str(os.getpid())])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    group, alone = done.stdout.split()
    assert Path(group).name.startswith(PREFIX) and alone == "True", done.stdout  # the watcher is not in it
    assert _eventually(lambda: not Path(group).exists(), within_s=20)  # the watcher saw the caller end
