"""Live progress of a running cell: phase, elapsed/total, send/receive rates, live p50/p99/max, lag.

Fed by the workers' progress events. Latencies go into per-second HdrHistograms (reset each refresh) for
the live percentiles, and the running max is kept across the whole cell. On a terminal it is a rich Live
panel; elsewhere (CI, Airflow task logs) a plain line every few seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ..core.hdr import new_histogram, record_many
from ..core.percentiles import format_ns
from ..core.schedule import PHASE_NAMES, PhasePlan

_LOG_EVERY_S = 5.0


class LiveMonitor:
    def __init__(
        self,
        label: str,
        primary: str,
        console: Console,
        on_refresh: Callable[[LiveMonitor], None] | None = None,
    ):
        self.label = label
        self.on_refresh = on_refresh  # called about once a second, before the per-second histograms reset
        self.primary = primary  # e2e | publish | rtt
        self.console = console
        self.plan: PhasePlan | None = None
        self.clock: Callable[[], int] = time.monotonic_ns  # the clock the plan is on (a host part: the host clock)
        self.attempted: dict[int, int] = {}
        self.acked: dict[int, int] = {}
        self.errors: dict[int, int] = {}
        self.received: dict[int, int] = {}
        self.lagging_consumed: dict[int, int] = {}
        self.relayed: dict[int, int] = {}
        self.background_done: dict[int, dict[str, Any]] = {}  # final event of each background process
        self.background_consumed: dict[tuple[str, int, int], int] = {}  # (background, subscription, reader) → read
        self.harness: dict[str, dict[str, Any]] = {}  # per worker name: its role and measure-phase self-view
        self.latency = new_histogram()
        self.lag = new_histogram()
        self.max_ns = 0
        self.last_producer_news_ns: int | None = None  # on `clock`: when a producer last said it sent or got acks
        self._last = (time.monotonic(), 0, 0)
        self._rates = (0.0, 0.0)
        self._last_log = 0.0
        self._live: Live | None = None

    # -- counters -------------------------------------------------------------------------------
    @property
    def total_sent(self) -> int:
        return sum(self.attempted.values()) - sum(self.errors.values())

    @property
    def total_received(self) -> int:
        return sum(self.received.values())

    def handle(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "done" and event.get("role") == "background":
            self.background_done[event["index"]] = event
        if event.get("kind") == "harness":
            self.harness[event["name"]] = {"role": event["role"], **event["summary"]}
        if event.get("kind") != "progress":
            return
        i = event["index"]
        if event["role"] == "producer":
            if (event["attempted"], event["acked"]) != (self.attempted.get(i), self.acked.get(i)):
                self.last_producer_news_ns = self.clock()
            self.attempted[i], self.acked[i], self.errors[i] = (
                event["attempted"],
                event["acked"],
                event["errors"],
            )
            record_many(self.lag, event["lag_ns"])
            if self.primary in ("publish", "rtt"):
                self._record(event["ack_intended_ns"])
        elif event["role"] == "laggard":
            self.lagging_consumed[i] = event["consumed"]
        elif event["role"] == "bg_consumer":
            self.background_consumed[(event["background"], event["subscription"], i)] = event["consumed"]
        elif event["role"] == "relay":
            self.relayed[i] = event["relayed"]
        elif event["role"] == "consumer":
            self.received[i] = event["received"]
            if self.primary in ("e2e", "chain"):
                self._record(event["e2e_intended_ns"])

    def _record(self, values: Any) -> None:
        if len(values):
            record_many(self.latency, values)
            self.max_ns = max(self.max_ns, int(values.max()))

    # -- display --------------------------------------------------------------------------------
    def __enter__(self) -> LiveMonitor:
        if self.console.is_terminal:
            self._live = Live(self.render(), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def refresh(self) -> None:
        now = time.monotonic()
        t_prev, sent_prev, recv_prev = self._last
        if now - t_prev >= 1.0:
            self._rates = (
                (self.total_sent - sent_prev) / (now - t_prev),
                (self.total_received - recv_prev) / (now - t_prev),
            )
            self._last = (now, self.total_sent, self.total_received)
            if self._live is not None:
                self._live.update(self.render())
            elif now - self._last_log >= _LOG_EVERY_S:
                self._last_log = now
                self.console.print(self.line(), highlight=False)
            if self.on_refresh is not None:
                self.on_refresh(self)
            self.latency.reset()
            self.lag.reset()

    def _phase(self) -> tuple[str, float, float]:
        if self.plan is None:
            return "starting", 0.0, 0.0
        now = self.clock()
        elapsed = max(0, now - self.plan.t0_ns) / 1e9
        total = self.plan.duration_ns / 1e9
        if now < self.plan.t0_ns:
            return "starting", 0.0, total
        if now >= self.plan.end_ns:
            return "draining", elapsed, total
        return PHASE_NAMES[int(self.plan.phases_of([now])[0])], elapsed, total

    def _live_percentiles(self) -> tuple[str, str, str]:
        if self.latency.get_total_count() == 0:
            return "-", "-", format_ns(self.max_ns) if self.max_ns else "-"
        return (
            format_ns(self.latency.get_value_at_percentile(50)),
            format_ns(self.latency.get_value_at_percentile(99)),
            format_ns(self.max_ns),
        )

    def line(self) -> str:
        phase, elapsed, total = self._phase()
        p50, p99, mx = self._live_percentiles()
        lag = format_ns(self.lag.get_value_at_percentile(99)) if self.lag.get_total_count() else "-"
        return (
            f"[{self.label}] {phase:8s} {elapsed:6.1f}/{total:.1f}s  sent {self.total_sent} "
            f"({self._rates[0]:.0f}/s)  recv {self.total_received} ({self._rates[1]:.0f}/s)  "
            f"{self.primary} p50 {p50} p99 {p99} max {mx}  lag p99 {lag}"
        )

    def render(self) -> Table:
        phase, elapsed, total = self._phase()
        p50, p99, mx = self._live_percentiles()
        lag = format_ns(self.lag.get_value_at_percentile(99)) if self.lag.get_total_count() else "-"
        table = Table(title=self.label, show_header=True, header_style="bold")
        for column in (
            "phase",
            "elapsed",
            "sent/s",
            "recv/s",
            f"{self.primary} p50",
            "p99",
            "max",
            "lag p99",
        ):
            table.add_column(column)
        table.add_row(
            phase,
            f"{elapsed:.1f}/{total:.1f}s",
            f"{self._rates[0]:.0f}",
            f"{self._rates[1]:.0f}",
            p50,
            p99,
            mx,
            lag,
        )
        return table

    def snapshot(self) -> dict[str, Any]:
        """The last second as plain data (for a status file another process reads): counters since the
        start, rates, and the last second's latency and send-lag percentiles in ns (None without samples)."""

        def at(histogram: Any, p: float) -> int | None:
            return int(histogram.get_value_at_percentile(p)) if histogram.get_total_count() else None

        phase, elapsed, total = self._phase()
        return {
            "phase": phase,
            "elapsed_s": round(elapsed, 3),
            "total_s": round(total, 3),
            "sent": self.total_sent,
            "received": self.total_received,
            "acked": sum(self.acked.values()),
            "send_errors": sum(self.errors.values()),
            "lagging_consumed": sum(self.lagging_consumed.values()),
            "sent_per_s": round(self._rates[0], 1),
            "received_per_s": round(self._rates[1], 1),
            "metric": self.primary,
            "latency_ns": {"50": at(self.latency, 50), "99": at(self.latency, 99), "99.9": at(self.latency, 99.9)},
            "max_ns": self.max_ns or None,
            "lag_ns": {"99": at(self.lag, 99), "99.9": at(self.lag, 99.9), "max": at(self.lag, 100)},
        }
