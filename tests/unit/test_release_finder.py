"""The release that moved the tail (bench_tasks/regressions/releases.py): pure rows in, the finder's verdict out."""

from __future__ import annotations

from typing import Any

from bench_tasks.regressions.history import SERIES_PERCENTILES, VALUE_COLUMNS, variation_column
from bench_tasks.regressions.releases import moves, release_histories, tail_verdict

MS = 1_000_000


def row(version: str, run: str, tail_ms: float, variation_pct: float | None = 5.0, **extra: Any) -> dict[str, Any]:
    """One history row: every percentile at 1 ms but the tail (p99 and beyond), which is `tail_ms`."""
    values = {
        VALUE_COLUMNS[p]: (tail_ms if p in ("99", "99.9", "99.99", "max") else 1.0) * MS for p in SERIES_PERCENTILES
    }
    noise = {variation_column(p): variation_pct for p in SERIES_PERCENTILES}
    return {
        "run_date": "2026-12-06", "run_id": run, "cell_id": f"c-{version}", "series_key": "s1", "system": "kafka",
        "version": version, "label": "kafka e2e", "metric": "e2e", "basis": "intended", **values, **noise, **extra,
    }  # fmt: skip


def spread(version: str, run: str, low_ms: float, high_ms: float) -> dict[str, Any]:
    band = {f"{VALUE_COLUMNS[p].removesuffix('_ns')}_{s}_ns": v * MS for p in SERIES_PERCENTILES for s, v in
            (("min", low_ms), ("max", high_ms))}  # fmt: skip
    return {"run_id": run, "cell_id": f"c-{version}", "metric": "e2e", "basis": "intended", **band}


def test_the_first_release_whose_tail_moved_beyond_its_noise_is_named() -> None:
    rows = [row("3.9.2", "r1", 10), row("4.0.2", "r1", 10.5), row("4.1.2", "r1", 25), row("4.2.1", "r1", 25.4)]
    (history,) = release_histories(rows)
    assert history.releases == ["3.9.2", "4.0.2", "4.1.2", "4.2.1"]
    verdict = tail_verdict(moves(history))
    assert verdict is not None and (verdict.release, verdict.previous) == ("4.1.2", "4.0.2")
    assert verdict.percentile == "99" and verdict.change.relative_change > 1.3


def test_a_move_inside_the_repeats_noise_or_band_names_nothing() -> None:
    noisy = [row("3.9.2", "r1", 10, 30.0), row("4.0.2", "r1", 12.5, 30.0)]  # +25 % on repeats that vary by 30 %
    assert tail_verdict(moves(release_histories(noisy)[0])) is None
    rows = [row("3.9.2", "r1", 10), row("4.0.2", "r1", 11.5)]  # +15 %, beyond the 10 % bar, but inside the band
    spreads = [spread("3.9.2", "r1", 8, 12)]
    assert tail_verdict(moves(release_histories(rows, spreads)[0])) is None
    assert tail_verdict(moves(release_histories(rows)[0])) is not None  # without the band it would count


def test_a_release_measured_again_stands_by_its_newest_run_and_a_backfill_joins_the_history() -> None:
    earlier = [row("3.9.2", "r1", 10), row("4.0.2", "r1", 10)]
    tonight = [
        {**row("4.0.2", "r2", 30), "run_date": "2026-12-07"},
        {**row("4.1.2", "r2", 30), "run_date": "2026-12-07"},
    ]
    (history,) = release_histories(earlier + tonight)
    assert [r["run_id"] for r in history.rows] == ["r1", "r2", "r2"]
    verdict = tail_verdict(moves(history))
    assert verdict is not None and verdict.release == "4.0.2"  # its newest run moved


def test_an_improvement_is_a_move_but_not_the_verdict() -> None:
    rows = [row("3.9.2", "r1", 20), row("4.0.2", "r1", 10)]
    found = moves(release_histories(rows)[0])
    assert found and not found[0].worse and tail_verdict(found) is None
    assert release_histories([row("3.9.2", "r1", 20)]) == []  # one release: no history across releases
