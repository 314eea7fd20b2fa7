"""Which cells of different systems the report sets side by side, and their ratios to the fastest, on literals."""

from __future__ import annotations

from typing import Any

import pytest

from bench_tasks.report.pairing import CellKey
from bench_tasks.report.side_by_side import Load, fastest, ratios_to, side_by_side, unmatched


def _key(cell_id: str, system: str, rate: float, measurement: str = "chain", size: int = 512, **more: Any) -> CellKey:
    workload = {"message_size_bytes": size, "rate_per_s": rate, **more}
    spec = {"system": system, "version": "1", "measurement": measurement, "workload": workload}
    return CellKey("R", cell_id, f"s-{cell_id}", f"{system} @{rate}", spec)


def test_cells_of_two_systems_pair_at_the_same_measurement_size_and_rate() -> None:
    """Seed 002's matrix: Chronicle at 100k and 500k, Kafka at 100k and 250k; only 100k is shared."""
    cells = [
        _key("c100", "chronicle", 100_000),
        _key("c500", "chronicle", 500_000),
        _key("k100", "kafka", 100_000, consumers=8),  # each system in its own configuration
        _key("k250", "kafka", 250_000, consumers=8),
    ]
    (group,) = side_by_side(cells)
    assert group.load == Load("chain", 512, 100_000.0)
    assert (group.cell_ids, group.systems) == (("c100", "k100"), ("chronicle", "kafka"))
    assert [c.cell_id for c in unmatched(cells)] == ["c500", "k250"]


def test_one_system_alone_or_another_size_or_measurement_is_never_paired() -> None:
    cells = [
        _key("a", "kafka", 1000),
        _key("b", "kafka", 1000, producers=2),  # two cells of one system: the one-field ratio's job
        _key("c", "nats", 1000, size=1024),
        _key("d", "nats", 1000, measurement="e2e"),
    ]
    assert side_by_side(cells) == []
    assert unmatched(cells) == []  # no other system ran these measurements and sizes at any rate


def test_two_cells_of_one_system_both_join_a_shared_load() -> None:
    """Kafka through two clients beside Chronicle: three cells, one group, each cell its own line."""
    cells = [_key("c", "chronicle", 100), _key("k1", "kafka", 100), _key("k2", "kafka", 100, producers=2)]
    (group,) = side_by_side(cells)
    assert group.cell_ids == ("c", "k1", "k2")


def test_repeats_of_a_cell_count_once() -> None:
    first, second = _key("c", "chronicle", 100), _key("c", "chronicle", 100)
    (group,) = side_by_side([first, second, _key("k", "kafka", 100)])
    assert group.cell_ids == ("c", "k")


def test_the_fastest_is_ranked_at_p99_and_every_ratio_divides_by_it() -> None:
    summaries = {
        "kafka": {"50": 2.0, "99": 2.6, "99.9": None, "max": 7.0},
        "chronicle": {"50": 0.004, "99": 0.00369, "99.9": 0.01, "max": 0.07},  # lower p99: the reference
    }
    reference = fastest(summaries)
    assert reference == "chronicle"
    out = ratios_to(reference, summaries)
    assert out["chronicle"]["50"] == out["chronicle"]["max"] == 1.0
    kafka = (out["kafka"]["50"], out["kafka"]["99"], out["kafka"]["max"])
    assert kafka == pytest.approx((500.0, 2.6 / 0.00369, 100.0))
    assert out["kafka"]["99.9"] is None  # unsupported on one side: no ratio, never a guess


def test_without_a_p99_on_every_side_the_fastest_is_ranked_at_p50() -> None:
    summaries = {"a": {"50": 3.0, "99": None, "max": 9.0}, "b": {"50": 1.0, "99": 8.0, "max": 10.0}}
    assert fastest(summaries) == "b"
