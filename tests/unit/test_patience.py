"""`SIXNINES_START_PATIENCE`: every broker start deadline scaled for a shared host, a bad value named."""

from __future__ import annotations

import pytest

from bench_tasks.brokers.patience import PATIENCE_ENV, with_patience


def test_unset_leaves_a_quiet_hosts_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PATIENCE_ENV, raising=False)
    assert with_patience(90.0) == 90.0


def test_a_factor_scales_every_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATIENCE_ENV, "2.5")
    assert (with_patience(20.0), with_patience(120.0)) == (50.0, 300.0)


@pytest.mark.parametrize("raw", ["fast", "0.5", "0", "-3", "21", "nan", "inf"])
def test_a_value_outside_one_to_twenty_is_named(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(PATIENCE_ENV, raw)
    with pytest.raises(ValueError, match=rf"{PATIENCE_ENV}='{raw}'.*from 1 to 20"):
        with_patience(30.0)
