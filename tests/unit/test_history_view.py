"""The release-history section's words: the verdict names a percentile as `p99.9` and the maximum as `max`."""

from __future__ import annotations

from types import SimpleNamespace

from bench_tasks.report.history_view import _verdict_text


def _verdict(percentile: str) -> SimpleNamespace:
    change = SimpleNamespace(before=17.23, after=29.8, unit="ms", relative_change=0.73, threshold=0.22)
    return SimpleNamespace(release="3.7.2", previous="3.6.2", percentile=percentile, change=change)


def test_the_verdict_names_the_maximum_as_max_and_a_percentile_with_its_p() -> None:
    assert "3.7.2: max 17.230 → 29.800 ms (+73%) against 3.6.2" in _verdict_text(_verdict("max"), ["3.6.2"])
    assert "3.7.2: p99.9 17.230" in _verdict_text(_verdict("99.9"), ["3.6.2"])


def test_no_move_says_which_releases_were_compared() -> None:
    assert _verdict_text(None, ["3.6.2", "4.4.0"]) == "No release's tail moved beyond the noise (3.6.2 → 4.4.0)."
