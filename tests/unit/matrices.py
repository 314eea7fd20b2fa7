"""Matrices as the unit tests write them: one system block, a small workload, parsed or refused."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.errors import MatrixError
from bench_tasks.spec.matrix import parse_matrix
from bench_tasks.spec.matrix_model import Matrix


def one_system(
    system: str,
    broker: dict[str, Any],
    versions: tuple[str, ...] = ("latest",),
    workload: dict[str, Any] | None = None,
    block: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A matrix of one system block (`block`: more keys of it) and one e2e measurement; `workload` keys go over
    64 B at 100/s for 3 s, `extra` keys go at the top level."""
    return {
        "name": "t",
        "systems": [{"system": system, "versions": list(versions), "broker": broker, **(block or {})}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "measure_s": 3, **(workload or {})},
        "measurements": ["e2e"],
        **extra,
    }


def parse(data: dict[str, Any]) -> Matrix:
    return parse_matrix(data, "m.yaml")


def problems(data: dict[str, Any]) -> list[str]:
    """Every problem a refused matrix was refused for (the test fails if it parses)."""
    with pytest.raises(MatrixError) as info:
        parse(data)
    return info.value.problems
