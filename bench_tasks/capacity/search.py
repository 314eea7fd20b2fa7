"""The search over offered rates, apart from running anything: geometric steps up from a start rate until a step
fails, then bisection between the last passing and the first failing rate until they are within the resolution.

Which step ends the search matters as much as where: the failing rate nearest above the capacity says why the
capacity is what it is (the objective, loss, a backlog, or the harness itself). A capacity bounded by the
harness's own saturation is not the broker's, and the result says so (`broker_bound` is False)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Verdict = Literal["pass", "objective", "loss", "backlog", "harness", "failed"]
BROKER_LIMITS = ("objective", "loss", "backlog")
# The finest resolution a search takes (1 %): a midpoint is rounded to 3 significant figures, which moves it by up
# to 1 % (100 -> 101), so a finer bisection could not place its next rate; nor is a step's own noise that small.
MIN_RESOLUTION = 0.01


@dataclass(frozen=True)
class Step:
    """One offered rate, run as a full cell, and what it showed."""

    rate_per_s: float
    verdict: Verdict
    why: str  # one line: what broke, or what held
    cell_id: str = ""
    achieved_rate_per_s: float = 0.0
    received_rate_per_s: float = 0.0
    percentiles_ms: dict[str, dict[str, float | None]] = field(default_factory=dict)  # metric -> p -> ms

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


@dataclass
class Search:
    """Geometric steps (`factor`) from `start_rate_per_s` up to `max_rate_per_s`, then bisection (in log space:
    rates are judged by ratio) until the failing rate is within `resolution` of the passing one. It always ends:
    a midpoint that rounds onto a bound ends it, and so does the planned number of bisections (`max_bisections`),
    which a midpoint rounded to 3 figures may otherwise exceed by one."""

    start_rate_per_s: float
    max_rate_per_s: float
    factor: float = 2.0
    resolution: float = 0.05
    steps: list[Step] = field(default_factory=list)

    def next_rate(self) -> float | None:
        """The next rate to run; None once the search has its answer."""
        if not self.steps:
            return self.start_rate_per_s
        low, high = self.bounds()
        if high is None:
            if low is None or low >= self.max_rate_per_s:
                return None
            return min(low * self.factor, self.max_rate_per_s)
        if low is None or high.rate_per_s <= low * (1 + self.resolution):
            return None
        if self._bisections() >= max_bisections(self.factor, self.resolution):
            return None  # rounded midpoints halve the interval only roughly: the plan's count is the limit
        return _between(low, high.rate_per_s)

    def _bisections(self) -> int:
        """Steps run since the first one that failed (the steps are recorded in the order they ran)."""
        first = next((i for i, s in enumerate(self.steps) if not s.passed), len(self.steps))
        return max(len(self.steps) - first - 1, 0)

    def record(self, step: Step) -> None:
        self.steps.append(step)

    def bounds(self) -> tuple[float | None, Step | None]:
        """(highest passing rate below the lowest failing step, that failing step)."""
        failing = [s for s in self.steps if not s.passed]
        high = min(failing, key=lambda s: s.rate_per_s) if failing else None
        passing = [s.rate_per_s for s in self.steps if s.passed and (high is None or s.rate_per_s < high.rate_per_s)]
        return (max(passing) if passing else None), high

    def result(self) -> dict[str, Any]:
        """The answer: capacity (highest passing rate; None if even the first step failed), what limited it, and
        whether that limit is the broker's."""
        capacity, high = self.bounds()
        if high is None:
            limit, why = "max-rate", f"held up to --max-rate {self.max_rate_per_s:g}/s: the capacity is higher"
        else:
            limit, why = high.verdict, f"at {high.rate_per_s:g}/s: {high.why}"
        return {
            "capacity_per_s": capacity,
            "limit": limit,
            "limit_why": why,
            "broker_bound": limit in BROKER_LIMITS and capacity is not None,
            "steps": [asdict(s) for s in sorted(self.steps, key=lambda s: s.rate_per_s)],
        }


def _between(low: float, high: float) -> float | None:
    """The geometric midpoint of two rates, to 3 figures; None where rounding puts it on (or past) either bound:
    no rate between them can be offered, so the search has its answer (run again, it would only repeat a step)."""
    middle = float(f"{math.sqrt(low * high):.3g}")
    return middle if low < middle < high else None


def max_search_steps(spec: Any, cell_rates: Sequence[float]) -> int:
    """The most steps a search of these cells can take (`spec`: the matrix's `capacity:`): geometric steps from
    the start rate up to the maximum, then bisections of the last factor down to the resolution."""
    starts = [spec.start_rate_per_s or rate for rate in cell_rates]
    rising = max(math.ceil(math.log(max(spec.max_rate_per_s / s, 1.0), spec.factor)) + 1 for s in starts)
    return rising + max_bisections(spec.factor, spec.resolution)


def max_bisections(factor: float, resolution: float) -> int:
    """How many halvings (in log space) take one geometric step of `factor` down to `resolution`: the most
    bisection steps a search takes, which is also where it stops (`Search.next_rate`)."""
    return max(math.ceil(math.log2(math.log(factor) / math.log1p(resolution))), 0)
