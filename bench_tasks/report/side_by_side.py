"""Which cells of different systems a run's "how much higher" chart sets side by side, and their ratios.

Seed 002 plots, per percentile, how many times higher one system's latency is than another's on the same
microservice. Inside one run, cells are set side by side when they measured the same thing under the same load:
the same measurement, message size and target rate (`workload.rate_per_s`). Same rate, not nearest rate: a
ratio between two loads mixes the system with the load (seed 002's own chart divides Kafka at 100k msg/s by
Chronicle at 500k and has to say so beside it), and a matrix can always give both systems a shared rate, as
`matrices/seed002-microservices.yaml` does at 100k. A cell whose measurement and size another system shares
but whose rate it lacks is named as unmatched, so the reader sees why it has no ratio. Everything else may
differ: each system runs in its own best configuration, as the seed ran them (Kafka with eight consumers,
Chronicle with one); the report lists what differs.

A group's reference is its fastest cell: the lowest response-time p99 of the metric (seed 002's headline
percentile; p50, then max, when a cell's count cannot support p99). Every cell's ratio is its own exact
percentile over the reference's at the same percentile (pairing.ratios), so the reference reads 1 throughout
and each other cell reads "times higher". Percentiles are never averaged: a repeated cell's values are those
of all its repeats' measure-phase samples together, recomputed exactly, as the published tables merge repeats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .pairing import CellKey, ratios

RANKING_PERCENTILES: tuple[str, ...] = ("99", "50", "max")  # the first every cell of a group supports decides


@dataclass(frozen=True)
class Load:
    """What two cells must share to be set side by side."""

    measurement: str
    message_size_bytes: int
    rate_per_s: float

    @property
    def title(self) -> str:
        return f"{self.measurement} {self.message_size_bytes} B @ {self.rate_per_s:,.0f} msg/s"


@dataclass(frozen=True)
class Group:
    """Cells (by cell id, repeats folded, in run order) of one load, from at least two systems."""

    load: Load
    cell_ids: tuple[str, ...]
    systems: tuple[str, ...]


def load_of(spec: Mapping[str, Any]) -> Load:
    workload = spec.get("workload") or {}
    return Load(
        str(spec.get("measurement")), int(workload.get("message_size_bytes") or 0), float(workload["rate_per_s"])
    )


def system_of(spec: Mapping[str, Any]) -> str:
    return str(spec.get("system"))


def groups_by_load(cells: Sequence[CellKey]) -> dict[Load, dict[str, CellKey]]:
    """Every load of the run with its cells by cell id (the first repeat stands for a repeated cell)."""
    out: dict[Load, dict[str, CellKey]] = {}
    for cell in cells:
        out.setdefault(load_of(cell.spec), {}).setdefault(cell.cell_id, cell)
    return out


def side_by_side(cells: Sequence[CellKey]) -> list[Group]:
    """Loads whose cells come from two or more systems, in the order their first cell ran."""
    groups = []
    for load, members in groups_by_load(cells).items():
        systems = tuple(dict.fromkeys(system_of(c.spec) for c in members.values()))
        if len(systems) >= 2:
            groups.append(Group(load, tuple(members), systems))
    return groups


def unmatched(cells: Sequence[CellKey]) -> list[CellKey]:
    """Cells of a measurement and size that another system also ran, at a rate no other system ran."""
    by_load = groups_by_load(cells)
    lonely = []
    for load, members in by_load.items():
        systems = {system_of(c.spec) for c in members.values()}
        if len(systems) >= 2:
            continue
        others = {
            system_of(c.spec)
            for other, cs in by_load.items()
            if (other.measurement, other.message_size_bytes) == (load.measurement, load.message_size_bytes)
            for c in cs.values()
        }
        if others - systems:
            lonely.extend(members.values())
    return lonely


def fastest(summaries: Mapping[str, Mapping[str, float | None]]) -> str:
    """The id of the cell with the lowest value at the first RANKING_PERCENTILES every cell supports (its
    response time: the service-time ratios divide by the same cell, so one chart has one reference)."""
    for key in RANKING_PERCENTILES:
        values = {cid: float(v) for cid, s in summaries.items() if (v := s.get(key)) is not None}
        if len(values) == len(summaries):
            return min(values, key=values.__getitem__)
    return next(iter(summaries))


def ratios_to(
    reference: str, summaries: Mapping[str, Mapping[str, float | None]]
) -> dict[str, dict[str, float | None]]:
    """Every cell's ratio to the reference cell per percentile (None where either side is unsupported)."""
    return {cid: ratios(summaries[reference], s) for cid, s in summaries.items()}
