"""What one cell task does: read its units' raw files, count their ledger, and per series sum, locate and pick
every level's statistics (all of a cell's groups lie in its own samples)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench_tasks import PERCENTILES
from bench_tasks.lake.s3conf import S3Settings
from spark_jobs import locate
from spark_jobs.exact import percentile_column
from spark_jobs.levels import LEVEL_KEYS, TIMED, WHOLE, level_frame, wanted_at

from .facts import UnitWork
from .ledger import MessageKeys, producer_rows
from .pick import picked
from .read import RECEIVED_COLUMNS, SENT_COLUMNS, Columns, read_columns
from .samples import RELAY_STARTS, Bucketed, Values, first_receipts, series_values, unit_series
from .sums import series_sums

COLUMNS = {p: percentile_column(p) for p in PERCENTILES}


@dataclass
class CellResult:
    """A cell's share of the Analysis: its producers' ledger rows, bucket sums and summary rows."""

    producers: pd.DataFrame  # ledger.PRODUCER_COLUMNS
    sums: pd.DataFrame  # sums.SUM_COLUMNS
    summary: pd.DataFrame  # LEVEL_KEYS, count, min_ns, max_ns, mean_ns, stddev_ns, p…_ns, unsupported


@dataclass(frozen=True)
class _Unit:
    work: UnitWork
    sent: Columns
    received: Columns
    first: np.ndarray | None  # which receipts are their message's first (samples.first_receipts)


SAMPLE_COLUMNS = frozenset({"intended_ns", "sent_ns", "acked_ns", "received_ns", "leader", *RELAY_STARTS})


def _read(work: UnitWork, reach: S3Settings | None) -> tuple[_Unit, pd.DataFrame]:
    """The unit's ledger rows, and of its raw columns what its samples need."""
    sent = read_columns(work.sent_files, SENT_COLUMNS, reach)
    received = read_columns(work.received_files, RECEIVED_COLUMNS, reach)
    producers = producer_rows(work, sent, received)
    first = first_receipts(received, MessageKeys(np.unique(received["producer_id"].values), [received["seq"]]))

    def kept(columns: Columns) -> Columns:
        return {name: column for name, column in columns.items() if name in SAMPLE_COLUMNS}

    return _Unit(work, kept(sent), kept(received), first), producers


def _located(sums: pd.DataFrame, b: Bucketed, cell_ix: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One series' bucket table at every level (locate.place) and its percentiles' values, picked from `b`."""
    rows = sums.assign(cell_ix=cell_ix)
    placed = locate.place(level_frame(rows[rows["kind"] == WHOLE], rows[rows["kind"] == TIMED]), LEVEL_KEYS)
    values = locate.located_values(placed, LEVEL_KEYS, lambda u: picked(b, cell_ix, u), list(COLUMNS), wanted_at)
    return placed, values


def _series_parts(units: list[_Unit], metric: int, basis: int) -> list[tuple[UnitWork, Values]]:
    return [
        (u.work, series_values(u.work, s, u.sent, u.received, u.first))
        for u in units
        for s in unit_series(u.work, u.received)
        if (s.metric, s.basis) == (metric, basis)
    ]


def run_cell(works: list[UnitWork], reach: S3Settings | None = None) -> CellResult:
    """The task: every unit of one cell (its repeats); one series at a time in memory beside the raw rows, of
    which only its bucket sums and picked values are kept. The summary is finished once, over all series.
    `reach`: the S3 lake's settings the driver hands its tasks (read.open_parquet)."""
    read = [_read(work, reach) for work in works]
    units = [unit for unit, _ in read]
    series = sorted({(s.metric, s.basis) for u in units for s in unit_series(u.work, u.received)})
    sums, placed, values = [], [], []
    for metric, basis in series:
        b = Bucketed.of(_series_parts(units, metric, basis))
        sums.append(series_sums(metric, basis, b))
        where, found = _located(sums[-1], b, works[0].cell_ix)
        placed.append(where)
        values.append(found)
    table = pd.concat(placed, ignore_index=True)
    summary = locate.finish(
        locate.group_stats(table, LEVEL_KEYS), pd.concat(values, ignore_index=True), LEVEL_KEYS, COLUMNS
    )
    return CellResult(
        pd.concat([producers for _, producers in read], ignore_index=True), pd.concat(sums, ignore_index=True), summary
    )
