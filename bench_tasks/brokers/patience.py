"""How long a broker may take to start, on a host that is not the broker's alone.

Every system's start waits for its nodes against a deadline chosen for a quiet host (NATS 20-30 s, Kafka 90 s,
RabbitMQ 120 s). A host shared with other work can take far longer without anything being wrong: Kafka nodes
that are ready in 2-7 s on a quiet two-core host were still starting after 90-120 s in the test suite's runs, in
processes that ran only on CPU time other work left them. `SIXNINES_START_PATIENCE` multiplies every deadline for a
broker getting ready: a start or restart, and a Kafka topic's creation or deletion settling. Never a measurement,
nor a cell's own timeouts (those are the matrix's). It is read at each use, so a process started with it in its
environment (Airflow's workers, the `sixnines` CLI, a test suite) passes it on to everything it starts.
"""

from __future__ import annotations

import math
import os

PATIENCE_ENV = "SIXNINES_START_PATIENCE"
MAX_PATIENCE = 20.0  # past this a start that never comes would hang a task for hours


def patience() -> float:
    """The factor `SIXNINES_START_PATIENCE` sets (1 when unset); a value that is no number from 1 to 20 is named in
    the error rather than ignored, since a typo would otherwise show up only as a slow host's failed start."""
    raw = os.environ.get(PATIENCE_ENV, "").strip()
    if not raw:
        return 1.0
    try:
        factor = float(raw)
    except ValueError:
        factor = math.nan
    if not 1.0 <= factor <= MAX_PATIENCE:
        raise ValueError(f"{PATIENCE_ENV}={raw!r}: expected a number from 1 to {MAX_PATIENCE:g}")
    return factor


def with_patience(timeout_s: float) -> float:
    """A deadline for a broker getting ready, chosen for a quiet host, scaled by the host's patience."""
    return timeout_s * patience()
