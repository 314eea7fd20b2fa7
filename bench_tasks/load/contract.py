"""The worker contract, in code: what a worker program is told, what it says back, and the commands between
(docs/workers.md is the prose; this is the one definition both the Python bridge and its tests read).

A worker that is not this Python package (the JVM worker, `bench_tasks/jvm/`) runs as a child process of the cell's
driving process and speaks over three channels:

- the **plan**: a properties file (`key=value` lines, UTF-8) whose path is the program's last argument: role,
  index, the schedule (a file of int64 intended offsets from t0, computed here by `core.schedule`, so every worker
  follows the same schedule to the nanosecond), the phases, the message size, the route and the system's settings;
- **commands** on its stdin, one per line: `start <t0_ns>` once t0 is fixed, `stop` when it should finish; the end
  of stdin means the driving process is gone, and the worker exits at once;
- **events** on its stdout, one JSON object per line, the same kinds and fields the Python workers put on their
  queue (`ready`, `progress`, `harness`, `done`, `failed`), plus `sample`: the worker's view of itself every
  report period (threads' run and runnable-wait times, CPU, backlog, handled), which the bridge judges with the
  same code as a Python worker's (`core.saturation`).

Raw samples come back as **sample files** in the worker's scratch folder (`rawfiles`), which the bridge turns into
the lake's Parquet files (`lake.records` schemas) without changing a value. Every timestamp is CLOCK_MONOTONIC.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.pauses import Pause
from ..errors import SixninesError

# Version history: 1 — plan keys below, commands start/stop, events ready/sample/progress/harness/done/failed.
CONTRACT_VERSION = 1
START, STOP = "start", "stop"
# Event kinds a worker may send; anything else on its stdout is a line of its log, not an event.
EVENT_KINDS = frozenset({"ready", "sample", "progress", "harness", "done", "failed"})
# Fields of progress events that carry per-message values (lists in JSON, numpy arrays on the events queue).
ARRAY_FIELDS = frozenset(
    {"lag_ns", "ack_intended_ns", "ack_sent_ns", "ack_at_ns", "e2e_intended_ns", "e2e_sent_ns", "e2e_at_ns"}
)
ROLES = ("producer", "consumer", "relay")  # what a worker program may be asked to play (responders: not yet)


class ContractError(SixninesError):
    """A worker program broke the contract (an unreadable event, a missing sample file)."""


@dataclass(frozen=True)
class WorkerProgram:
    """A worker that is another program honouring the contract. `argv`: its command, the plan file's path appended
    ('{scratch}' in an argument becomes the worker's scratch folder); `transport`: what the program calls the
    system (plan key `transport`); `settings`: the system's plan keys; `runtime`: for the record and the verdict's
    words; `pauses`: reads what the program's runtime logged in its scratch folder about pauses it imposed on every
    thread (a JVM's safepoints), to name the cause of a stall; `secret_env`: turns the cell's client access
    settings (its target's: TLS, a SASL login) into environment variables for the program, so a secret reaches it
    in memory and never in the plan file, which is written to disk."""

    argv: tuple[str, ...]
    transport: str
    settings: Mapping[str, str] = field(default_factory=dict)
    runtime: str = "jvm"
    env: Mapping[str, str] = field(default_factory=dict)
    # How a producer waits for an intended time: park (then spin the last 50 µs), spin, or sleep (park all the way:
    # a late wake-up is send lag, and no core is spent spinning where the system's own latency is milliseconds)
    wait: str = "park"
    pauses: Callable[[Path], list[Pause]] | None = None
    secret_env: Callable[[Mapping[str, Any]], Mapping[str, str]] | None = None

    def command(self, scratch: Path, plan_file: Path) -> list[str]:
        return [a.replace("{scratch}", str(scratch)) for a in self.argv] + [str(plan_file)]


def plan_keys(
    *,
    role: str,
    index: int,
    name: str,
    cell_id: str,
    address: str,
    route: str,
    names: str,
    measurement: str,
    message_size_bytes: int,
    phase_ns: tuple[int, int, int],
    max_schedule_lag_ms: float,
    report_every_ms: int,
    scratch: Path,
    program: WorkerProgram,
    schedule: Path | None = None,
    messages: int = 0,
    expected_messages: int = 0,
) -> dict[str, str]:
    """Every key of a worker's plan (docs/workers.md, "The plan"), as text."""
    if role not in ROLES:
        raise ContractError(f"role {role!r}: a worker program plays {', '.join(ROLES)}")
    warmup, measure, cooldown = phase_ns
    keys: dict[str, Any] = {
        "contract_version": CONTRACT_VERSION,
        "role": role,
        "index": index,
        "name": name,
        "cell_id": cell_id,
        "transport": program.transport,
        "address": address,
        "route": route,
        "names": names,
        "measurement": measurement,
        "message_size_bytes": message_size_bytes,
        "warmup_ns": warmup,
        "measure_ns": measure,
        "cooldown_ns": cooldown,
        "max_schedule_lag_ms": max_schedule_lag_ms,
        "report_every_ms": report_every_ms,
        "scratch": scratch,
        "wait": program.wait,
        "schedule": schedule or "",
        "messages": messages,
        "expected_messages": expected_messages,
    }
    clash = sorted(set(program.settings) & set(keys))
    if clash:
        raise ContractError(f"the program's settings {clash} would replace the contract's own plan keys")
    return {k: str(v) for k, v in {**keys, **program.settings}.items()}


def write_plan(keys: Mapping[str, str], path: Path) -> Path:
    """The plan as a properties file."""
    path.write_text(properties_text(keys), encoding="utf-8")
    return path


def properties_text(keys: Mapping[str, str]) -> str:
    """`keys` as java.util.Properties reads them (keys and values escaped), sorted: a plan, or the secret settings
    a worker program gets in its environment."""
    return "".join(f"{_escape(k, key=True)}={_escape(v)}\n" for k, v in sorted(keys.items()))


def _escape(text: str, key: bool = False) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out.startswith(" "):
        out = "\\" + out
    return out


def write_schedule(offsets_ns: np.ndarray, path: Path) -> Path:
    """A producer's intended offsets from t0 (sorted), as the little-endian int64 file its plan names."""
    np.ascontiguousarray(offsets_ns, dtype="<i8").tofile(path)
    return path


def decode_event(line: str) -> dict[str, Any] | None:
    """One stdout line as an event (arrays as int64 numpy arrays), or None when the line is not an event (a
    library's or the runtime's own output, kept in the worker's log). ContractError for an event that is not
    well formed."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return None
    kind = event.get("kind") if isinstance(event, dict) else None
    if kind not in EVENT_KINDS:
        return None
    for key in ("role", "index"):
        if key not in event:
            raise ContractError(f"event {kind!r} has no {key!r}: {text[:200]}")
    for key in ARRAY_FIELDS & event.keys():
        event[key] = np.asarray(event[key], dtype=np.int64)
    return event
