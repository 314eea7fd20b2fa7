"""Repeats of a matrix's cells: how many times each runs (a number, or rules matched against the cell's axis
values), and the run order, in rounds, so a host's drift over the run spreads over every cell."""

from __future__ import annotations

from typing import Any

from .matrix_model import Cell, RepeatRule


def repeats_for(repeats: int | list[RepeatRule], chosen: dict[str, Any]) -> int:
    if isinstance(repeats, int):
        return repeats
    return next((rule.times for rule in repeats if rule_matches(rule.when, chosen)), 1)


def expand_repeats(cells: list[Cell]) -> list[Cell]:
    """Every run of every cell, in rounds: all cells once, then the repeated ones again, and so on. Spreading a
    cell's repeats over the sweep (rather than back to back) lets slow drifts of the host show up as
    run-to-run variation instead of hiding inside one cell's repeats."""
    rounds = max((c.repeats for c in cells), default=1)
    return [c.model_copy(update={"repeat": r}) for r in range(1, rounds + 1) for c in cells if r <= c.repeats]


def rule_matches(rule: dict[str, Any], chosen: dict[str, Any]) -> bool:
    def hit(key: str, wanted: Any) -> bool:
        if key not in chosen:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        return chosen[key] in options

    return all(hit(k, v) for k, v in rule.items())
