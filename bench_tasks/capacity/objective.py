"""Latency objectives a capacity search holds a cell to: `e2e p99 < 10ms`, `publish p99.9 < 50ms`, `rtt max < 1s`.

A metric is one the cell measures (`e2e`, `publish`, `rtt`, a chain's `hop1`/`hop2`); the percentile is one of
the table's (`p50` … `p99.9999`) or `max`; the bound is response time, from each message's intended send time
(coordinated omission corrected), as every table of the tool reports it. A percentile the step's sample count
cannot support breaks the objective: an unsupported percentile is not a pass."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.analysis import CellAnalysis
from ..core.percentiles import PERCENTILES
from ..errors import SixninesError

_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_FORM = re.compile(r"^\s*(\w+)\s+(p[\d.]+|max)\s*<\s*([\d.]+)\s*(ns|us|µs|ms|s)\s*$")


@dataclass(frozen=True)
class Objective:
    metric: str
    percentile: str  # a PERCENTILES key, or "max"
    bound_ns: int
    text: str

    @property
    def name(self) -> str:
        """`e2e p99`, `rtt max`: the metric and percentile, as the objective was written."""
        return f"{self.metric} {self.percentile if self.percentile == 'max' else 'p' + self.percentile}"

    def value_ns(self, analysis: CellAnalysis) -> int | None:
        """The step's value of this objective's percentile; None where unsupported or not measured."""
        summary = analysis.metrics.get(self.metric, {}).get("intended")
        if summary is None:
            return None
        return summary.max_ns if self.percentile == "max" else summary.percentiles.get(self.percentile)

    def holds(self, analysis: CellAnalysis) -> bool:
        value = self.value_ns(analysis)
        return value is not None and value < self.bound_ns


def parse_objective(text: str) -> Objective:
    """`e2e p99 < 10ms` as an Objective; a SixninesError naming what is wrong otherwise."""
    found = _FORM.match(text)
    if not found:
        raise SixninesError(f"--slo {text!r}: expected 'METRIC pNN < NUMBER UNIT', e.g. 'e2e p99 < 10ms'")
    metric, percentile, number, unit = found.groups()
    key = "max" if percentile == "max" else percentile[1:]
    if key != "max" and key not in PERCENTILES:
        known = ", ".join("p" + p for p in PERCENTILES)
        raise SixninesError(f"--slo {text!r}: percentile {percentile} — one of {known}, max")
    bound = float(number) * _UNITS_NS[unit]
    if bound <= 0:
        raise SixninesError(f"--slo {text!r}: the bound must be above zero")
    return Objective(metric, key, int(bound), text.strip())
