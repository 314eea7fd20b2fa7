"""Build small cells for integration tests through the same validation a matrix file gets."""

from __future__ import annotations

from typing import Any

from bench_tasks.cell.runner import select_cells
from bench_tasks.spec.matrix import Cell, parse_matrix


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
        "warmup_s": 1,
        "measure_s": 2,
        "cooldown_s": 1,
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
