"""The cell pass's numpy parts on their own (spark_jobs.cellpass): both ways of keying messages and of summing
groups give the same answers, and a message's first receipt is chosen as Spark's min of the receipt struct."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spark_jobs.cellpass import keys, sums
from spark_jobs.cellpass.facts import UnitWork
from spark_jobs.cellpass.keys import KeySpace, scan
from spark_jobs.cellpass.ledger import Ledger
from spark_jobs.cellpass.read import Col
from spark_jobs.cellpass.samples import FirstReceipts, Repeats, first_of, log_bucket


def _col(values: list[int | None]) -> Col:
    return Col(np.array([v or 0 for v in values], np.int64), np.array([v is not None for v in values]))


def _space_of(batches: list[dict[str, Col]], dense: bool) -> KeySpace:
    """The batches' key space; not `dense`: as if no bitmap were small enough (sorted keys)."""
    limits = keys.DENSE_MIN_KEYS, keys.KEYS_PER_ROW
    if not dense:
        keys.DENSE_MIN_KEYS, keys.KEYS_PER_ROW = 0, 0
    try:
        space = KeySpace(scan(batches))
    finally:
        keys.DENSE_MIN_KEYS, keys.KEYS_PER_ROW = limits
    if space.needs_ranks:
        space.rank(b["seq"].values[b["seq"].valid] for b in batches)
    return space


def _space(producers: list[int], seqs: list[int | None], dense: bool) -> KeySpace:
    return _space_of([{"producer_id": _col(producers), "seq": _col(seqs)}], dense)


@pytest.mark.parametrize("dense", [True, False], ids=["bitmaps", "sorted"])
@pytest.mark.parametrize("seqs", [[0, 1, 2, 5, 5, 9], [0, 1, 2, 2**62, 2**62, -(2**62)]], ids=["offset", "ranked"])
@pytest.mark.parametrize("first", [3, 8], ids=["narrow-first", "wide-first"])
def test_message_sets_count_the_same_either_way(seqs: list[int], dense: bool, first: int) -> None:
    producers = [first, first, first, 7, 7, 7]  # producer 7's seqs (the wide ones) first or last of the key space
    space = _space(producers, seqs, dense)
    assert space.dense == (dense and seqs[3] == 5)  # seqs spread too wide take sorted sets whatever the limit
    assert (space.ranked is not None) == (not space.dense and seqs[3] != 5)  # and past 2^62, their ranks
    key = space.of(np.array(producers), _col(seqs))
    every = space.add(space.empty(), key)
    first_three = space.add(space.empty(), key[:3])
    order = [0, 1] if first < 7 else [1, 0]  # counts come in producer id order
    assert space.count(every)[order].tolist() == [3, 2]  # producer 7 sent one seq twice
    assert space.count(space.both(every, first_three))[order].tolist() == [3, 0]
    assert space.count(space.minus(every, first_three))[order].tolist() == [0, 2]
    assert space.holds(first_three, key).tolist() == [True] * 3 + [False] * 3
    assert space.size_of(every) == 5


def test_sums_in_place_and_sorted_agree() -> None:
    rng = np.random.default_rng(3)
    groups = {"unit": rng.integers(0, 3, 5000), "bucket": rng.integers(-5, 900, 5000)}
    values = rng.integers(-(10**6), 10**12, 5000)
    dense = pd.DataFrame(sums.grouped(groups, values))
    limit, sums.DENSE_LIMIT = sums.DENSE_LIMIT, 0
    try:
        ordered = pd.DataFrame(sums.grouped(groups, values))
    finally:
        sums.DENSE_LIMIT = limit
    assert len(dense) == len(ordered) == len(pd.DataFrame(groups).drop_duplicates())
    pd.testing.assert_frame_equal(dense, ordered, check_exact=False, rtol=1e-12)
    one = dense[(dense["unit"] == 1) & (dense["bucket"] == 7)].iloc[0]
    mine = values[(groups["unit"] == 1) & (groups["bucket"] == 7)]
    assert (one["n"], one["vmin"], one["vmax"], one["vsum"]) == (len(mine), mine.min(), mine.max(), mine.sum())


@pytest.mark.parametrize("rows", [1, 2, 5], ids=["batches-of-1", "batches-of-2", "one-batch"])
def test_the_first_receipt_is_the_least_in_field_order_nulls_first(rows: int) -> None:
    received = {
        "producer_id": _col([0, 0, 0, 0, 0]),
        "seq": _col([1, 1, 1, 2, None]),
        "received_ns": _col([50, 40, 40, 10, 5]),
        "intended_ns": _col([1, 1, 1, 1, 1]),
        "sent_ns": _col([2, 2, None, 2, 2]),
        "leader": _col([None, None, None, None, None]),
        "relay_received_ns": _col([None] * 5),
        "relay_sent_ns": _col([None] * 5),
    }
    parts = [{n: c.take(np.arange(i, min(i + rows, 5))) for n, c in received.items()} for i in range(0, 5, rows)]
    space = KeySpace(scan(parts))
    repeats = Repeats(space)
    for part in parts:
        repeats.add(part)
    assert repeats.any()
    first = FirstReceipts(space, repeats)
    for i, part in zip(range(0, 5, rows), parts, strict=True):
        first.add(part, i)
    # seq 1: received 40 twice, the one without a sent time sorts first; seq 2 once; the row without a seq stays
    losers = first.losers()
    assert losers.tolist() == [0, 1]
    assert first_of(losers, 0, 5).tolist() == [False, False, True, True, True]
    assert first_of(losers, 2, 3) is None
    once = {name: column.take(np.array([0, 3, 4])) for name, column in received.items()}
    alone = Repeats(KeySpace(scan([once])))
    alone.add(once)
    assert not alone.any()


def test_log_buckets_are_the_histograms_sixteenths_below_and_mirror_under_one() -> None:
    values = np.array([-3, 0, 1, 2, 3, 1000, 10**9])
    assert (log_bucket(values[values >= 1]) >> 3).tolist() == np.floor(np.log2(values[values >= 1]) * 16).tolist()
    assert log_bucket(np.array([0])).tolist() == [-1]
    assert log_bucket(np.array([-3])).tolist() == [-1 - 256]  # −1 − floor(log2(4) · 128)


def test_partials_fed_in_batches_equal_the_whole_grouped_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A series' sums are fed a batch at a time and merged as they grow: the same rows as one grouping."""
    rng = np.random.default_rng(5)
    groups = {"unit": rng.integers(0, 2, 9000), "sec": rng.integers(-3, 40, 9000), "bucket": rng.integers(0, 99, 9000)}
    values = rng.integers(-(10**6), 10**12, 9000)
    monkeypatch.setattr(sums, "MERGE_ROWS", 50)  # merge often
    fed = sums.Partials(("unit", "sec", "bucket"))
    for start in range(0, 9000, 700):
        fed.add({k: v[start : start + 700] for k, v in groups.items()}, values[start : start + 700])
    assert len(fed.parts) > 1 and fed.done > 0  # merged along the way, some still waiting
    whole = pd.DataFrame(sums.grouped(groups, values)).sort_values(["unit", "sec", "bucket"], ignore_index=True)
    streamed = fed.frame().sort_values(["unit", "sec", "bucket"], ignore_index=True)
    pd.testing.assert_frame_equal(streamed, whole, check_exact=False, rtol=1e-12)


def _ledger_batches() -> tuple[list[dict[str, Col]], list[dict[str, Col]]]:
    """Two producers' sent rows and their receipts, two batches a side: producer 1 sends seq 1 twice and a row
    without a seq or phase; producer 9 (seqs from 10^6) fails one send, and one of its messages arrives twice,
    once in each receipt batch."""
    sent = {
        "producer_id": _col([1, 1, 1, 1, 9, 9, 9]),
        "seq": _col([0, 1, 1, None, 10**6, 10**6 + 1, 10**6 + 2]),
        "intended_ns": _col([10, 20, 20, 30, 10, 20, 30]),
        "sent_ns": _col([11, 21, 22, 31, None, 21, 31]),
        "acked_ns": _col([None, 25, None, None, None, 29, 38]),
        "phase": _col([1, 1, 1, None, 1, 1, 1]),
    }
    received = {
        "producer_id": _col([1, 1, 9, 9, 9]),
        "seq": _col([0, 1, 10**6 + 1, 10**6 + 1, 10**6 + 2]),
        "intended_ns": _col([10, 20, 20, 20, 30]),
        "sent_ns": _col([11, 21, 21, 21, 31]),
        "received_ns": _col([15, 26, 24, 27, 40]),
        "relay_received_ns": _col([None] * 5),
    }

    def cut(side: dict[str, Col], at: int) -> list[dict[str, Col]]:
        rows = len(side["seq"].values)
        return [{n: c.take(np.arange(lo, hi)) for n, c in side.items()} for lo, hi in ((0, at), (at, rows))]

    return cut(sent, 4), cut(received, 3)


@pytest.mark.parametrize("dense", [True, False], ids=["bitmaps", "sorted"])
def test_the_ledger_counts_the_same_over_bitmaps_and_sorted_keys(dense: bool) -> None:
    sent, received = _ledger_batches()
    space = _space_of([*sent, *received], dense)
    ledger = Ledger(UnitWork(0, 0, 0, 0, 100, 1, True, (), ()), space)
    for batch in sent:
        ledger.sent(batch)
    for batch in received:
        ledger.received(batch)
    rows = ledger.frame().set_index("producer_id")
    counts = ["scheduled", "sent", "acknowledged", "got", "sent_lost", "acked_lost", "dupes"]
    assert rows.loc[1, counts].tolist() == [3, 4, 1, 2, 0, 0, 0]
    assert rows.loc[1, ["duplicate_seqs", "null_seq", "null_phase", "min_seq", "max_seq"]].tolist() == [1, 1, 1, 0, 1]
    assert rows.loc[9, counts].tolist() == [3, 2, 2, 2, 0, 0, 1]
    assert (rows.loc[9, "min_lag_ns"], rows.loc[9, "min_e2e_intended_ns"], rows.loc[9, "min_seq"]) == (1, 4, 10**6)
