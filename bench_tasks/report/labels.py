"""Placing chart labels so they never overlap.

`spread`: each label wants to sit at a position (its point's height, as a fraction of the axes); labels
closer than `gap` are pushed apart — as little as possible, keeping their order — and the whole column is kept
inside [low, high]. The chart draws each label there with a leader line to its point.
`stack_rows`: labels along a time axis (faults, leader changes) each start at their event; a label goes to
the first row where it does not run into the one before it. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence


def spread(wanted: Sequence[float], gap: float, low: float = 0.0, high: float = 1.0) -> list[float]:
    """Positions as close to `wanted` as possible, at least `gap` apart and within [low, high] (when they fit;
    when `gap` × count exceeds the room, the column starts at `low` and keeps the gap)."""
    if not wanted:
        return []
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [max(low, min(high, wanted[i])) for i in order]
    for k in range(1, len(placed)):  # push up from the bottom
        placed[k] = max(placed[k], placed[k - 1] + gap)
    if placed[-1] > high:  # then down from the top, as far as the bottom allows
        placed[-1] = max(high, low + gap * (len(placed) - 1))
        for k in range(len(placed) - 2, -1, -1):
            placed[k] = min(placed[k], placed[k + 1] - gap)
    out = [0.0] * len(wanted)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


def stack_rows(spans: Sequence[tuple[float, float]], pad: float = 0.0) -> list[int]:
    """A row for each (start, end) span such that spans in one row do not overlap (first fit, by start)."""
    row_ends: list[float] = []
    rows = [0] * len(spans)
    for i in sorted(range(len(spans)), key=lambda i: spans[i][0]):
        start, end = spans[i]
        row = next((r for r, last in enumerate(row_ends) if last + pad <= start), len(row_ends))
        if row == len(row_ends):
            row_ends.append(end)
        else:
            row_ends[row] = end
        rows[i] = row
    return rows
