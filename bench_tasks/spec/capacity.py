"""A matrix's `capacity:` (what a capacity search holds each cell to, and its bounds) and its objectives: latency
objectives (`e2e p99 < 10ms`, `publish p99.9 < 50ms`, `rtt max < 1s`) and backlog objectives (`backlog p99 < 1000
msgs`).

A latency objective's metric is one the cell measures (`e2e`, `publish`, `rtt`, a chain's `hop1`/`hop2`); the
percentile is one of the table's (`p50` … `p99.9999`) or `max`; the bound is response time, from each message's
intended send time (coordinated omission corrected), as every table of the tool reports it. A percentile the step's
sample count cannot support breaks the objective: an unsupported percentile is not a pass.

A backlog objective bounds the messages sent and not yet arrived (received; acknowledged for publish and rtt)
over the measure phase, weighted by time (`core.backlog`): `backlog p99 < 1000 msgs` holds when the backlog was
under 1000 for at least 99 % of the phase, `backlog max < 1000 msgs` when it never reached 1000. It is how
OpenMessaging Benchmark judges a rate sustainable (its max-rate search backs off once more than 1000 messages are
published and not yet received)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from ..capacity.search import MIN_RESOLUTION
from ..core.percentile_keys import PERCENTILES
from ..errors import ObjectiveError
from .base import StrictModel

if TYPE_CHECKING:
    from ..core.analysis import CellAnalysis

BACKLOG = "backlog"
_UNITS_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_MESSAGES = ("msgs", "messages")
_FORM = re.compile(r"^\s*(\w+)\s+(p[\d.]+|max)\s*<\s*([\d.]+)\s*(ns|us|µs|ms|s|msgs|messages)\s*$")


@dataclass(frozen=True)
class Objective:
    """What every step must hold: a latency (ns) or the backlog (messages), at a percentile or its maximum, below
    `bound`."""

    metric: str
    percentile: str  # a PERCENTILES key, or "max"
    bound: int  # ns for a latency, messages for the backlog
    text: str

    @property
    def is_backlog(self) -> bool:
        return self.metric == BACKLOG

    @property
    def name(self) -> str:
        """`e2e p99`, `rtt max`, `backlog p99`: the metric and percentile, as the objective was written."""
        return f"{self.metric} {self.percentile if self.percentile == 'max' else 'p' + self.percentile}"

    def value(self, analysis: CellAnalysis) -> int | None:
        """The step's value of this objective (ns, or messages); None where unsupported or not measured."""
        if self.is_backlog:
            backlog = analysis.backlog
            if backlog is None:
                return None
            return backlog.max_messages if self.percentile == "max" else backlog.percentiles.get(self.percentile)
        summary = analysis.metrics.get(self.metric, {}).get("intended")
        if summary is None:
            return None
        return summary.max_ns if self.percentile == "max" else summary.percentiles.get(self.percentile)

    def holds(self, analysis: CellAnalysis) -> bool:
        value = self.value(analysis)
        return value is not None and value < self.bound

    def shown(self, value: int | None) -> str:
        """A value of this objective as a step's account writes it: ms for a latency, messages for the backlog."""
        if value is None:
            return "not measured" if self.is_backlog else "unsupported"
        return f"{value:,} msgs" if self.is_backlog else f"{value / 1e6:.3f} ms"


def parse_objective(text: str) -> Objective:
    """`e2e p99 < 10ms` or `backlog p99 < 1000 msgs` as an Objective; an ObjectiveError naming what is wrong."""
    found = _FORM.match(text)
    if not found:
        raise ObjectiveError(
            f"objective {text!r}: expected 'METRIC pNN < NUMBER UNIT', e.g. 'e2e p99 < 10ms' or "
            "'backlog p99 < 1000 msgs'"
        )
    metric, percentile, number, unit = found.groups()
    key = "max" if percentile == "max" else percentile[1:]
    if key != "max" and key not in PERCENTILES:
        known = ", ".join("p" + p for p in PERCENTILES)
        raise ObjectiveError(f"objective {text!r}: percentile {percentile} — one of {known}, max")
    bound = _messages(text, metric, number, unit) if metric == BACKLOG or unit in _MESSAGES else _ns(number, unit)
    if bound <= 0:
        raise ObjectiveError(f"objective {text!r}: the bound must be above zero")
    return Objective(metric, key, bound, text.strip())


def _ns(number: str, unit: str) -> int:
    return int(float(number) * _UNITS_NS[unit])


def _messages(text: str, metric: str, number: str, unit: str) -> int:
    """A backlog's bound: a whole number of messages, and only the backlog is counted in messages."""
    if metric != BACKLOG:
        raise ObjectiveError(f"objective {text!r}: {unit} counts messages, which only 'backlog' is measured in")
    if unit not in _MESSAGES:
        raise ObjectiveError(f"objective {text!r}: the backlog is counted in messages, e.g. 'backlog p99 < 1000 msgs'")
    if not number.isdigit():
        raise ObjectiveError(f"objective {text!r}: the backlog's bound is a whole number of messages")
    return int(number)


class CapacitySpec(StrictModel):
    """`capacity:` in a matrix: its DAG (and `sixnines capacity` without `--slo`) searches each cell's capacity."""

    objectives: list[str] = Field(
        min_length=1, description="e.g. 'e2e p99 < 10ms', 'backlog p99 < 1000 msgs'; every one must hold"
    )
    max_rate_per_s: float = Field(gt=0, description="the highest rate offered")
    start_rate_per_s: float | None = Field(None, gt=0, description="the first rate offered (default: the cell's)")
    factor: float = Field(2.0, ge=1.1, description="geometric step until a rate fails")
    resolution: float = Field(
        0.05, ge=MIN_RESOLUTION, le=1, description="bisect until the failing rate is within this ratio (0.01 at least)"
    )
    step_s: float | None = Field(None, gt=0, description="measure seconds of each step (default: the cell's)")

    @field_validator("objectives")
    @classmethod
    def _objectives_parse(cls, value: list[str]) -> list[str]:
        for text in value:
            try:
                parse_objective(text)
            except ObjectiveError as exc:
                raise ValueError(str(exc)) from None
        return value

    def parsed(self) -> list[Objective]:
        return [parse_objective(text) for text in self.objectives]
