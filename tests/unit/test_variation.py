"""bench_tasks.core.variation: JLBH's % variation and the min/median/max spread across repeats."""

from __future__ import annotations

import pytest

from bench_tasks.core.variation import spread, variation_pct


def test_jlbh_formula_with_its_precedence() -> None:
    # JLBH PercentileSummary: 100 * (max - min) / (max + min / 2)
    assert variation_pct(1.0, 3.0) == pytest.approx(100 * 2 / 3.5)
    assert variation_pct(2.0, 2.0) == 0.0
    assert variation_pct(0.0, 0.0) == 0.0


def test_spread_skips_unsupported_repeats() -> None:
    s = spread([3.0, None, 1.0, 2.0])
    assert s is not None
    assert (s.values, s.min, s.median, s.max) == (3, 1.0, 2.0, 3.0)
    assert s.variation_pct == pytest.approx(100 * 2 / 3.5)


def test_one_value_has_no_variation_and_none_has_no_spread() -> None:
    one = spread([None, 5.0])
    assert one is not None and one.variation_pct is None and one.median == 5.0
    assert spread([None, None]) is None
