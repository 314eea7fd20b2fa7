"""The gate's Great Expectations process: it validates what the driver sends it, and `close` ends it at once
(terminated, not left to its slow orderly exit), twice as well as once; and a process that used one exits
without GX's progress bars or a leaked semaphore on its stderr (the analysis task's log)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd

from spark_jobs.gateproc import GateProcess

REPO = Path(__file__).resolve().parents[2]


def test_validates_then_close_terminates_the_worker() -> None:
    gate = GateProcess()
    try:
        frame = pd.DataFrame({"cell_id": ["a"], "metric": ["e2e"], "basis": ["intended"]})
        outcomes = gate.validate({"faults": (frame, ())})
        assert set(outcomes) == {"faults"} and set(outcomes["faults"]) == {"success", "evaluated", "failed", "result"}
        (worker,) = gate.pool._processes.values()
    finally:
        gate.close()
    assert not worker.is_alive() and worker.exitcode == -signal.SIGTERM
    gate.close()  # a second close finds nothing left to end


def test_a_process_that_used_the_gate_exits_with_a_quiet_stderr() -> None:
    script = (
        "import pandas as pd\nfrom spark_jobs.gateproc import GateProcess\ngate = GateProcess()\n"
        "frame = pd.DataFrame({'cell_id': ['a'], 'metric': ['e2e'], 'basis': ['intended']})\n"
        "print(sorted(gate.validate({'faults': (frame, ())})))\ngate.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "['faults']", done.stderr
    assert "leaked semaphore" not in done.stderr and "Calculating Metrics" not in done.stderr, done.stderr
