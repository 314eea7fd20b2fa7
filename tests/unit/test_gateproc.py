"""The gate's Great Expectations process: it validates what the driver sends it, and `close` ends it at once
(terminated, not left to its slow orderly exit), twice as well as once."""

from __future__ import annotations

import signal

import pandas as pd

from spark_jobs.gateproc import GateProcess


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
