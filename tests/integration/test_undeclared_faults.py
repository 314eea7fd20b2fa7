"""Faults nobody declared, on a real broker: a core NATS server SIGKILLed from outside mid-measure fails its cell
with a reason naming the node, the time on the cell's clock and the signal; the moment is a fault record in
result.json and the row; every sample still lands; and `sixnines run` exits non-zero for such a run.

A declared kill or restart does not trip the watch: tests/integration/test_matrix_faults.py's cells (a JetStream
R3 follower restarted, a Kafka leader restarted) assert `status == "ok"`, and the injector's declarations are
unit-tested in tests/unit/test_brokerwatch.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from rich.console import Console

from bench_tasks.cell.runner import run_cell
from bench_tasks.lake.layout import Lake, RunInfo

from .helpers import make_cell, schedule_phases

pytestmark = [pytest.mark.usefixtures("no_orphans"), pytest.mark.host_alone]

KILL_AFTER_S = 1.0  # into the measure phase
MATRIX = """\
name: undeclared
systems:
  - system: nats
    versions: [latest]
    broker: {mode: core}
workload: {message_size_bytes: 128, rate_per_s: 200, warmup_s: 0.5, measure_s: 3, cooldown_s: 0.5, drain_timeout_s: 1}
measurements: [e2e]
"""


class OutsideKiller(threading.Thread):
    """A user's `kill -9` of the cell's nats-server: the first one started under `parent` after this was made,
    SIGKILLed `KILL_AFTER_S` into the measure phase (read from the cell's own status.json)."""

    def __init__(self, parent: psutil.Process):
        super().__init__(daemon=True)
        self.parent = parent
        self.known = {p.pid for p in parent.children(recursive=True)}
        self.killed: tuple[int, int] | None = None  # (pid, monotonic ns when the signal was sent)
        self.measure_start_ns = 0
        self.error: str | None = None

    def run(self) -> None:
        try:
            server = self._server()
            status = _work_folder(server) / "status.json"
            measure_start = self.measure_start_ns = self._measure_start(status)
            while time.monotonic_ns() < measure_start + int(KILL_AFTER_S * 1e9):
                time.sleep(0.005)
            at = time.monotonic_ns()
            os.kill(server.pid, signal.SIGKILL)
            self.killed = (server.pid, at)
        except Exception as exc:  # the test asserts it killed: a failure here must show, not hang
            self.error = f"{type(exc).__name__}: {exc}"

    def _server(self) -> psutil.Process:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            for proc in self.parent.children(recursive=True):
                try:
                    if proc.pid not in self.known and "-c" in proc.cmdline() and proc.name() == "nats-server":
                        return proc  # a server, not a `nats-server --version` asked for the release
                except psutil.NoSuchProcess:
                    continue
            time.sleep(0.05)
        raise TimeoutError("no nats-server was started")

    def _measure_start(self, status: Path) -> int:
        phases = schedule_phases(status, time.monotonic() + 120)
        if phases is None:
            raise TimeoutError(f"the schedule did not start ({status})")
        return int(phases["measure"][0])


def _work_folder(server: psutil.Process) -> Path:
    """The cell's work folder: the nearest folder above the server's config that holds the cell's state.json."""
    argv = server.cmdline()
    config = Path(argv[argv.index("-c") + 1])
    return next(folder for folder in config.parents if (folder / "state.json").exists())


def test_a_broker_killed_from_outside_fails_the_cell_and_keeps_its_samples(tmp_path: Path, console: Console) -> None:
    cell = make_cell("e2e", rate_per_s=200, warmup_s=0.5, measure_s=3, cooldown_s=0.5, drain_timeout_s=1)
    killer = OutsideKiller(psutil.Process())
    killer.start()
    report = run_cell(cell, Lake(tmp_path), RunInfo.new(), console)
    killer.join(5)

    assert killer.killed is not None, killer.error
    pid, killed_ns = killer.killed
    # When the signal went, on the measure clock: KILL_AFTER_S, or later where the host held the killer up (a
    # clean-clone CI run: 195 ms). The watch must date the exit after it, within a few polls.
    killed_s = (killed_ns - killer.measure_start_ns) / 1e9
    print(f"\nkilled at measure +{killed_s:.3f} s; reason: {report.reason}")
    assert killed_s >= KILL_AFTER_S
    assert report.status == "failed"
    said = re.search(
        r"broker node 0 \(nats-server pid (\d+)\) killed by SIGKILL at t0\+([\d.]+) s \(measure \+([\d.]+) s\)",
        report.reason or "",
    )
    assert said is not None and int(said[1]) == pid
    assert -0.001 <= float(said[3]) - killed_s < 0.15  # seen within a few ticks of the kill (said in ms)
    assert "no fault was declared" in report.reason

    result = json.loads((report.path / "result.json").read_text())
    (row,) = pq.read_table(next((tmp_path / "runs").rglob("cells.parquet"))).to_pylist()
    assert (result["status"], row["status"]) == ("failed", "failed")
    (record,) = result["faults"]
    print(f"fault record: {record}")
    assert (record["kind"], record["node"], record["target"]) == ("undeclared-exit", 0, "undeclared")
    assert record["detail"] == f"broker node 0 (nats-server pid {pid}) killed by SIGKILL"
    assert 0 <= record["start_ns"] - killed_ns < 150_000_000
    assert -1e-6 <= record["fired_s"] - killed_s < 0.15  # (fired_s is rounded to the microsecond)
    assert json.loads(row["faults_json"]) == result["faults"]

    assert (report.path / "sent-p0.parquet").exists()  # every sample landed
    accounting = report.analysis.accounting
    print(f"accounting: {accounting}")
    assert accounting.scheduled == 200 * 3
    assert accounting.send_errors + accounting.lost > 0  # the outage is in the numbers and now in the verdict


def test_sixnines_run_exits_nonzero_when_a_broker_is_killed_from_outside(tmp_path: Path) -> None:
    matrix = tmp_path / "undeclared.yaml"
    matrix.write_text(MATRIX)
    cli = subprocess.Popen(
        [sys.executable, "-m", "bench_tasks", "run", str(matrix), "--lake", str(tmp_path / "lake"), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killer = OutsideKiller(psutil.Process(cli.pid))
    killer.start()
    out, err = cli.communicate(timeout=300)
    killer.join(5)

    assert killer.killed is not None, killer.error
    assert cli.returncode == 1, err
    (cell,) = json.loads(out)["cells"]
    assert cell["status"] == "failed"
    assert f"nats-server pid {killer.killed[0]}) killed by SIGKILL" in cell["reason"]
    assert "1 of 1 cell(s) failed" in err
