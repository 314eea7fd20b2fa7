"""Placing chart labels so they never overlap: one-dimensional spreading along an axis.

Each label wants to sit at a position (its point's height, as a fraction of the axes); labels closer than
`gap` are pushed apart — as little as possible, keeping their order — and the whole column is kept inside
[low, high]. The chart then draws each label at its spread position with a leader line to its point. Pure.
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
