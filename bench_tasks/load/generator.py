"""The open-loop load generator's worker processes: producers, consumers, rtt responders, service-chain
relays, background-traffic producers and unmeasured (lagging or background) consumers.

Each worker is its own OS process (the GIL must not couple producers) running one precise asyncio loop.
A producer follows its fixed schedule and never waits for the system before the next send: when it is
behind, it sends at once and the message keeps its *intended* time, so latency measured from intended
time is response time, free of coordinated omission. Every timestamp is `now_ns()` taken here, never in the
driver: `time.monotonic_ns()`, or on a cell split over real hosts the host clock (`clock.host_clock`).

Both directions work in batches so one process keeps up with 100,000 messages a second: a producer wakes
when its next message is due and hands the client every message due by then in one driver call, each
stamped as the client takes it (`pacing.open_loop`); a receiver stamps whatever the client handed over together
and decodes the headers of a whole batch at once into preallocated columns (`receivedlog.ReceivedLog`). Workers stream
progress (counts, fresh latencies, and their own load: `saturation.ProcessWatch`) to the parent every
250 ms, report the measure phase's harness facts before they finish, and write their own Parquet file.

This module is a worker's entry point: it sets the process up and runs its role. The roles live beside it
(`producer`, `receivers`, `relay`, `background`), built from the parts every role shares: the plan and schedules
(`plan`), the pacing of sends and reports (`pacing`), the per-message logs (`sentlog`, `receivedlog`) and what a
worker says of itself (`selffacts`).
"""

from __future__ import annotations

import os
import sys

from setproctitle import setproctitle

from .background import produce_background
from .failure import report_failure
from .loop import run_precise, tighten_timer_slack
from .owner import exit_with
from .plan import Channels, WorkerPlan
from .producer import produce
from .receivers import consume, count_consumer, respond
from .relay import forward_chain

# Python threads hand the interpreter lock over every 5 ms by default: a thread woken to stamp a message
# could wait that long for a busy sibling. Workers hand it over 10× sooner.
_SWITCH_INTERVAL_S = 0.0005


def worker_main(plan: WorkerPlan, channels: Channels) -> None:
    """Process entry point. A worker that fails reports it (`failure.report_failure`: one console line, the
    traceback in the cell's log, a `failed` event) and exits 1; SystemExit makes multiprocessing print nothing."""
    try:
        _work(plan, channels)
    except Exception as exc:
        report_failure(plan, channels.events, exc)
        sys.exit(1)


def _work(plan: WorkerPlan, channels: Channels) -> None:
    setproctitle(f"sixnines {plan.role}-{plan.index} cell {plan.cell_id}")  # readable in ps/top
    if channels.owner_pid:
        exit_with(channels.owner_pid)
    if plan.netns:  # first, before any socket exists: everything this worker opens belongs to its host
        from ..topology.netns import enter

        enter(plan.netns)
    if plan.cpus:
        os.sched_setaffinity(0, plan.cpus)
    tighten_timer_slack()
    sys.setswitchinterval(_SWITCH_INTERVAL_S)
    role = {
        "producer": produce,
        "consumer": consume,
        "responder": respond,
        "relay": forward_chain,
        "laggard": count_consumer,
        "background": produce_background,
        "bg_consumer": count_consumer,
    }[plan.role]
    run_precise(role(plan, channels, plan.clock()))
