"""Repeated trials of a latency comparison on a noisy host (`bench/native_compare.py --trials N`).

One run of each tool says little on a small shared host: another process waking at the wrong moment moves a
p99 by tens of percent, and it moves the tool that happened to run then. So a latency row runs the native tool
and sixnines in turn, trial after trial (native, sixnines, native, sixnines, … on one broker), records every
trial's figures with the host load around it, and summarises the *per-trial* ratios: each ratio compares two
runs taken seconds apart under about the same load, and their median is the ratio half the trials were at or
under. Nothing is dropped or picked: every trial is kept beside the summary, and `met` counts the trials
whose ratio was within the target.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """sixnines over the native tool; None when either figure is missing (or the native one is zero)."""
    return None if not ours or not theirs else round(ours / theirs, 3)


def trial_ratios(native: Mapping[str, Any], ours: Mapping[str, Any], percentiles: Sequence[str]) -> dict[str, Any]:
    """One trial's ratios: `ours[p]` (sixnines' figure at percentile p, ms) over `native[f"p{p}_ms"]`."""
    return {p: ratio(ours.get(p), native.get(f"p{p}_ms")) for p in percentiles}


def summarize_trials(trials: Sequence[Mapping[str, Any]], percentiles: Sequence[str], target: float) -> dict[str, Any]:
    """Per percentile: the median of the trials' ratios, their range, and how many trials were within `target`.
    A trial without a ratio (a failed cell) counts as a trial not within it, never silently left out."""
    out: dict[str, Any] = {}
    for p in percentiles:
        values = [t["ratio"].get(p) for t in trials]
        present = np.array([v for v in values if v is not None], dtype=np.float64)
        out[p] = {
            "median": None if present.size == 0 else round(float(np.median(present)), 3),
            "min": None if present.size == 0 else float(present.min()),
            "max": None if present.size == 0 else float(present.max()),
            "met": int((present <= target).sum()),
            "trials": len(values),
        }
    return out
