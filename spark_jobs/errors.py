"""The analytics subsystem's errors (STYLE 13): each says which run, cell or expectation and why.

They derive from the harness's SixninesError so the `sixnines` CLI prints them as one line and exits
non-zero, like every other failure of the harness.
"""

from __future__ import annotations

from bench_tasks import SixninesError


class AnalyticsError(SixninesError):
    """A Spark job could not read its input or produce its tables (a missing run, an unknown schema)."""


class CompareError(AnalyticsError):
    """Two cells were asked to be compared although they differ in more than the compared axis."""


class GateError(AnalyticsError):
    """The Great Expectations gate failed: the tables were quarantined, not published."""

    def __init__(self, run_id: str, failed: list[str], quarantine: str):
        self.run_id = run_id
        self.failed = failed
        self.quarantine = quarantine
        lines = "\n".join(f"  - {f}" for f in failed)
        super().__init__(
            f"run {run_id}: {len(failed)} expectation(s) failed; nothing published, tables quarantined in "
            f"{quarantine}\n{lines}"
        )
