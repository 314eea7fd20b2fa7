"""The latency rows' trials (`bench/trials.py`): each trial's ratio compares its own pair of runs, the row's ratio
is the median of them, and a trial without a figure counts as not within the target rather than vanishing."""

from __future__ import annotations

from bench.trials import ratio, summarize_trials, trial_ratios


def test_a_trial_ratio_is_sixnines_over_the_native_figure_of_the_same_trial() -> None:
    native = {"p50_ms": 0.080, "p99_ms": 0.200}
    assert trial_ratios(native, {"50": 0.088, "99": 0.180}, ("50", "99")) == {"50": 1.1, "99": 0.9}
    assert ratio(None, 0.1) is None and ratio(0.1, 0.0) is None


def test_the_summary_is_the_median_of_per_trial_ratios_with_range_and_count_within_target() -> None:
    trials = [{"ratio": {"99": r}} for r in (0.6, 1.3, 0.9, 1.1, 2.0)]
    (summary,) = summarize_trials(trials, ("99",), 1.25).values()
    assert summary == {"median": 1.1, "min": 0.6, "max": 2.0, "met": 3, "trials": 5}


def test_a_trial_without_a_ratio_is_counted_but_never_within_the_target() -> None:
    trials = [{"ratio": {"50": 1.0}}, {"ratio": {"50": None}}, {"ratio": {"50": 1.2}}]
    summary = summarize_trials(trials, ("50",), 1.25)["50"]
    assert summary["median"] == 1.1
    assert (summary["met"], summary["trials"]) == (2, 3)
    assert summarize_trials([{"ratio": {"50": None}}], ("50",), 1.25)["50"]["median"] is None
