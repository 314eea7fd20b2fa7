"""The cell pass's numpy parts on their own (spark_jobs.cellpass): both ways of keying messages and of summing
groups give the same answers, and a message's first receipt is chosen as Spark's min of the receipt struct."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spark_jobs.cellpass import sums
from spark_jobs.cellpass.ledger import MessageKeys
from spark_jobs.cellpass.read import Col
from spark_jobs.cellpass.samples import first_receipts, log_bucket


def _col(values: list[int | None]) -> Col:
    return Col(np.array([v or 0 for v in values], np.int64), np.array([v is not None for v in values]))


@pytest.mark.parametrize("bitmaps", [True, False], ids=["bitmaps", "sorted"])
@pytest.mark.parametrize("seqs", [[0, 1, 2, 5, 5, 9], [0, 1, 2, 2**62, 2**62, -(2**62)]], ids=["offset", "ranked"])
def test_message_sets_count_the_same_either_way(seqs: list[int], bitmaps: bool) -> None:
    producers = np.array([3, 3, 3, 7, 7, 7])
    keys = MessageKeys(np.array([3, 7]), [_col(seqs)])
    assert (keys.ranked is None) == (seqs[3] == 5)  # seqs spread too wide are keyed by their rank
    keys.dense = bitmaps
    key = keys.of(producers, _col(seqs))
    every = keys.distinct(key, np.ones(6, bool))
    first_three = keys.distinct(key, np.arange(6) < 3)
    assert keys.count(every).tolist() == [3, 2]  # producer 7 sent one seq twice
    assert keys.count(keys.both(every, first_three)).tolist() == [3, 0]
    assert keys.count(keys.minus(every, first_three)).tolist() == [0, 2]
    assert keys.repeated(key).tolist() == [False, False, False, True, True, False]


def test_sums_in_place_and_sorted_agree() -> None:
    rng = np.random.default_rng(3)
    groups = {"unit": rng.integers(0, 3, 5000), "bucket": rng.integers(-5, 900, 5000)}
    values = rng.integers(-(10**6), 10**12, 5000)
    dense = sums.grouped(groups, values)
    limit, sums.DENSE_LIMIT = sums.DENSE_LIMIT, 0
    try:
        ordered = sums.grouped(groups, values)
    finally:
        sums.DENSE_LIMIT = limit
    assert len(dense) == len(ordered) == len(pd.DataFrame(groups).drop_duplicates())
    pd.testing.assert_frame_equal(dense, ordered, check_exact=False, rtol=1e-12)
    one = dense[(dense["unit"] == 1) & (dense["bucket"] == 7)].iloc[0]
    mine = values[(groups["unit"] == 1) & (groups["bucket"] == 7)]
    assert (one["n"], one["vmin"], one["vmax"], one["vsum"]) == (len(mine), mine.min(), mine.max(), mine.sum())


def test_the_first_receipt_is_the_least_in_field_order_nulls_first() -> None:
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
    first = first_receipts(received, MessageKeys(np.array([0]), [received["seq"]]))
    # seq 1: received 40 twice, the one without a sent time sorts first; seq 2 once; the row without a seq stays
    assert first is not None and first.tolist() == [False, False, True, True, True]
    once = {name: column.take(np.array([0, 3, 4])) for name, column in received.items()}
    assert first_receipts(once, MessageKeys(np.array([0]), [once["seq"]])) is None


def test_log_buckets_are_the_histograms_sixteenths_below_and_mirror_under_one() -> None:
    values = np.array([-3, 0, 1, 2, 3, 1000, 10**9])
    assert (log_bucket(values[values >= 1]) >> 3).tolist() == np.floor(np.log2(values[values >= 1]) * 16).tolist()
    assert log_bucket(np.array([0])).tolist() == [-1]
    assert log_bucket(np.array([-3])).tolist() == [-1 - 256]  # −1 − floor(log2(4) · 128)
