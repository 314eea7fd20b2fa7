"""What one cell task does: stream its units' raw files to count their ledger and find their first receipts, then
per series sum, locate and pick every level's statistics (all of a cell's groups lie in its own samples)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from bench_tasks import PERCENTILES
from bench_tasks.lake.s3conf import S3Settings
from spark_jobs import locate
from spark_jobs.exact import percentile_column
from spark_jobs.levels import LEVEL_KEYS, TIMED, WHOLE, level_frame, wanted_at

from .facts import UnitWork
from .keys import KeySpace, scan
from .ledger import LEDGER_RECEIVED, LEDGER_SENT, Ledger
from .pick import Picks
from .read import RECEIVED_COLUMNS, Columns, batches, local_copies
from .samples import Bucketed, FirstReceipts, Repeats, Series, first_of, series_values, unit_series
from .sums import SeriesSums

COLUMNS = {p: percentile_column(p) for p in PERCENTILES}


@dataclass
class CellResult:
    """A cell's share of the Analysis: its producers' ledger rows, bucket sums and summary rows."""

    producers: pd.DataFrame  # ledger.PRODUCER_COLUMNS
    sums: pd.DataFrame  # sums.SUM_COLUMNS, the WHOLE and DONE rows (TIMED rows serve the task's SECOND level)
    summary: pd.DataFrame  # LEVEL_KEYS, count, min_ns, max_ns, mean_ns, stddev_ns, p…_ns, unsupported


@dataclass(frozen=True)
class _Unit:
    work: UnitWork
    producers: pd.DataFrame  # its ledger rows
    losers: np.ndarray  # the row numbers of receipts not their message's first (samples.FirstReceipts)
    relayed: bool  # whether any receipt carries a relay's times


KEY_COLUMNS = ("producer_id", "seq")
Key = tuple[int, int]  # a series: metric, basis


def _account(work: UnitWork, rows: int, sums: dict[Key, SeriesSums]) -> _Unit:
    """The unit's ledger, first receipts and the bucket sums of its sent rows' series, in up to four streams
    over its files: the seq ranges (the key space); the sent rows (ledger and sums); the receipts (ledger, and
    the messages received again); those messages' receipts (only if any was). Seqs spread past 2^62 values
    take one more, for their ranks."""

    def stream(columns: tuple[str, ...], sent: bool = True, received: bool = True) -> Iterator[Columns]:
        files = (*(work.sent_files if sent else ()), *(work.received_files if received else ()))
        yield from batches(files, columns, rows)

    space = KeySpace(scan(stream(KEY_COLUMNS)))
    if space.needs_ranks:
        space.rank(b["seq"].values[b["seq"].valid] for b in stream(KEY_COLUMNS))
    ledger, repeats = Ledger(work, space), Repeats(space)
    sent_series = [s for s in unit_series(work, False) if not s.received]
    for batch in stream(LEDGER_SENT, received=False):
        ledger.sent(batch)
        for s in sent_series:
            _sums(sums, s).add(Bucketed.one(work, series_values(work, s, batch, None)))
    for batch in stream(LEDGER_RECEIVED, sent=False):
        ledger.received(batch)
        repeats.add(batch)
    losers = np.empty(0, np.int64)
    if repeats.any():
        first, start = FirstReceipts(space, repeats), 0
        for batch in stream(RECEIVED_COLUMNS, sent=False):
            first.add(batch, start)
            start += len(batch["seq"].values)
        losers = first.losers()
    return _Unit(work, ledger.frame(), losers, ledger.relayed)


def _sums(sums: dict[Key, SeriesSums], s: Series) -> SeriesSums:
    """The series' sums, begun on first use."""
    key = (s.metric, s.basis)
    if key not in sums:
        sums[key] = SeriesSums(*key)
    return sums[key]


def _columns(series: list[Series]) -> tuple[str, ...]:
    """What a side's batches must hold for `series` (all of one side)."""
    names = {"intended_ns", *(s.start for s in series), *(s.done for s in series)}
    if series[0].received:
        names |= {"leader", "relay_received_ns"}
    return tuple(sorted(names))


def _bucketed(unit: _Unit, wanted: set[Key], rows: int, sides: tuple[bool, ...]) -> Iterator[tuple[Series, Bucketed]]:
    """The unit's samples of the `wanted` series of `sides` (False: sent rows, True: receipts), a batch at a
    time."""
    work = unit.work
    series = [s for s in unit_series(work, unit.relayed) if (s.metric, s.basis) in wanted]
    for received in sides:
        mine = [s for s in series if s.received == received]
        if not mine:
            continue
        start = 0
        for batch in batches(work.received_files if received else work.sent_files, _columns(mine), rows):
            count = len(batch["intended_ns"].values)
            first = first_of(unit.losers, start, count) if received else None
            start += count
            for s in mine:
                yield s, Bucketed.one(work, series_values(work, s, batch, first))


def _located(sums: pd.DataFrame, cell_ix: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One series' bucket table at every level (locate.place) and where its wanted percentiles lie
    (locate.ranks)."""
    rows = sums.assign(cell_ix=cell_ix)
    placed = locate.place(level_frame(rows[rows["kind"] == WHOLE], rows[rows["kind"] == TIMED]), LEVEL_KEYS)
    return placed, locate.ranks(placed, LEVEL_KEYS, list(COLUMNS), wanted_at)


class Stats:
    """Each group's statistics (locate.group_stats) of the series' located tables, computed a few series at a
    time: a located table is as large as its series' seconds × buckets, and pandas' cost per call is fixed."""

    def __init__(self) -> None:
        self.waiting: list[pd.DataFrame] = []
        self.done: list[pd.DataFrame] = []

    def add(self, placed: pd.DataFrame) -> None:
        self.waiting.append(placed)
        if sum(len(p) for p in self.waiting) > STATS_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self.waiting:
            self.done.append(locate.group_stats(pd.concat(self.waiting, ignore_index=True), LEVEL_KEYS))
            self.waiting = []

    def frame(self) -> pd.DataFrame:
        self._flush()
        return pd.concat(self.done, ignore_index=True)


STATS_ROWS = 1 << 16  # located rows Stats lets wait (~10 MiB)


def _local(works: list[UnitWork], reach: S3Settings | None, folder: Path) -> list[UnitWork]:
    """`works` reading local files: an S3 lake's objects copied into `folder` (read.local_copies)."""
    uris = [u for w in works for u in (*w.sent_files, *w.received_files)]
    local = local_copies(uris, reach, folder)

    def moved(work: UnitWork) -> UnitWork:
        return replace(
            work,
            sent_files=tuple(local[u] for u in work.sent_files),
            received_files=tuple(local[u] for u in work.received_files),
        )

    return [moved(w) for w in works]


def run_cell(works: list[UnitWork], reach: S3Settings | None = None, batch_rows: int = 0) -> CellResult:
    """The task: every unit of one cell (its repeats), streamed in batches of `batch_rows` (read.BATCH_ROWS):
    each unit's ledger, first receipts and its sent rows' bucket sums (_account); then its receipts' bucket
    sums; every series located on its sums; then one more stream keeping the candidates of the located buckets,
    from which the exact values are picked. It holds a batch, per unit a few bits a message while its ledger is
    counted, and per series its bucket table and candidates. `reach`: the S3 lake's settings the driver hands
    its tasks (read.local_copies)."""
    cell_ix = works[0].cell_ix
    with tempfile.TemporaryDirectory(prefix="sixnines-cell-") as folder:
        works = _local(works, reach, Path(folder))
        sums: dict[Key, SeriesSums] = {}
        units = [_account(work, batch_rows, sums) for work in works]
        series = sorted({(s.metric, s.basis) for u in units for s in unit_series(u.work, u.relayed)})
        for unit in units:
            for s, b in _bucketed(unit, set(series), batch_rows, (True,)):
                _sums(sums, s).add(b)
        frames, stats, values, picks = [], Stats(), [], {}
        for key in series:
            frame = sums.pop(key, SeriesSums(*key)).frame()
            placed, located = _located(frame, cell_ix)
            stats.add(placed)
            values.append(locate.known_values(located, LEVEL_KEYS))
            picks[key] = Picks(cell_ix, locate.unknown(located))
            frames.append(frame[frame["kind"] != TIMED])  # the driver reads WHOLE and DONE rows only
            del placed, located, frame
        wanted = {key for key, p in picks.items() if p.levels}
        for unit in units if wanted else []:
            for s, b in _bucketed(unit, wanted, batch_rows, (False, True)):
                picks[(s.metric, s.basis)].add(b)
    values += [p.values() for p in picks.values()]
    summary = locate.finish(stats.frame(), pd.concat(values, ignore_index=True), LEVEL_KEYS, COLUMNS)
    producers = pd.concat([u.producers for u in units], ignore_index=True)
    return CellResult(producers, pd.concat(frames, ignore_index=True), summary)
