"""The CTRL+Z test: freeze the broker during `measure` and check that the harness sees the stall.

A harness free of coordinated omission reports the stall in its upper percentiles and max (response
time, from intended send); service time (from actual send) hides it. Both are returned side by side.
On NATS the test uses synchronous request/reply (wrk2's shape, where coordinated omission bites hardest);
Kafka has no request/reply, so there it is one-way e2e against the frozen broker — the open-loop producer
keeps sending into the client's buffer, so there service time shows most of the stall too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from ..lake.layout import Lake, RunInfo
from ..spec.matrix import parse_matrix
from ..systems import system
from .drive import Fault
from .runner import CellReport, run_cell, select_cells


@dataclass(frozen=True)
class CalibrationSpec:
    system: str
    version: str = "latest"
    measurement: str = "rtt"  # the system's calibration shape by default (the CLI fills it in)
    rate_per_s: float = 2000
    connections: int = 100
    message_size_bytes: int = 64
    warmup_s: float = 2
    measure_s: float = 30
    cooldown_s: float = 2
    stall_s: float = 1.4


@dataclass
class CalibrationResult:
    report: CellReport
    spec: CalibrationSpec

    @property
    def metric(self) -> str:
        return self.spec.measurement

    def to_dict(self) -> dict:
        a = self.report.analysis
        series = a.metrics.get(self.metric, {}) if a else {}
        stall = next((f for f in self.report.faults if f["kind"] == "stall"), None)
        observed = (stall["end_ns"] - stall["start_ns"]) / 1e9 if stall and stall["end_ns"] else None
        corrected = series["intended"].as_ms() if "intended" in series else {}
        uncorrected = series["sent"].as_ms() if "sent" in series else {}
        stall_ms = self.spec.stall_s * 1e3
        return {
            "cell_id": self.report.cell.id,
            "status": self.report.status,
            "reason": self.report.reason,
            "measurement": self.metric,
            "stall_s": self.spec.stall_s,
            "stall_observed_s": observed,
            "count": series["intended"].count if "intended" in series else 0,
            "corrected": corrected,
            "uncorrected": uncorrected,
            "checks": {
                "corrected_max_at_least_0.9_stall": bool(corrected.get("max") and corrected["max"] >= 0.9 * stall_ms),
                "corrected_p99_at_least_0.5_stall": bool(corrected.get("99") and corrected["99"] >= 0.5 * stall_ms),
                **(
                    {  # only a closed loop hides the stall from service time
                        "uncorrected_p99_below_0.5_stall": bool(
                            uncorrected.get("99") is not None and uncorrected["99"] < 0.5 * stall_ms
                        )
                    }
                    if self.metric == "rtt"
                    else {}
                ),
            },
            "accounting": a.accounting.to_dict() if a else None,
            "path": str(self.report.path),
        }


def calibration_matrix(spec: CalibrationSpec) -> dict:
    workload = {
        "message_size_bytes": spec.message_size_bytes,
        "rate_per_s": spec.rate_per_s,
        "producers": 1,
        "consumers": 1,
        "connections": spec.connections if spec.measurement == "rtt" else 1,
        "warmup_s": spec.warmup_s,
        "measure_s": spec.measure_s,
        "cooldown_s": spec.cooldown_s,
        "request_timeout_s": max(10.0, 3 * spec.stall_s),
        "drain_timeout_s": max(5.0, 2 * spec.stall_s),
    }
    broker = dict(system(spec.system).calibration_broker)
    return {
        "name": "calibration",
        "systems": [{"system": spec.system, "versions": [spec.version], "broker": broker}],
        "workload": workload,
        "measurements": [spec.measurement],
    }


def calibrate(spec: CalibrationSpec, lake_root: str | Path, console: Console) -> CalibrationResult:
    """Run one cell with a SIGSTOP stall of `stall_s` centred in the measure phase."""
    if not 0 < spec.stall_s < spec.measure_s:
        from ..errors import MatrixError

        raise MatrixError(
            "calibrate", [f"stall: {spec.stall_s} — must be > 0 and shorter than measure ({spec.measure_s})"]
        )
    matrix = parse_matrix(calibration_matrix(spec), "calibrate")
    (cell,) = select_cells(matrix)
    fault = Fault("stall", at_s=(spec.measure_s - spec.stall_s) / 2, duration_s=spec.stall_s)
    # The stall is deliberate: the generator's lag during it is the point, not a harness failure.
    report = run_cell(cell, Lake(lake_root), RunInfo.new(), console, faults=[fault], gate_lag=False)
    return CalibrationResult(report, spec)
