"""The pick pass's first filter (spark_jobs.analysis._envelopes): a few value ranges per unit × metric × basis
that hold every located bucket, and leave out the gaps between far-apart percentiles."""

from __future__ import annotations

import itertools

from spark_jobs.analysis import ENVELOPE_RANGES, _envelopes
from spark_jobs.exact import bucket_bounds
from spark_jobs.levels import SECOND_SHIFT


def _inside(value: int, ranges: list[tuple[int, int]]) -> bool:
    return any(low <= value <= high for low, high in ranges)


def test_every_located_bucket_lies_in_one_of_a_few_sorted_disjoint_ranges() -> None:
    fine = [640, 641, 700, 701, 702, 900, 1300, 1301, 1800, 2200, 2500, -3]  # p50s…, the tail, a value below 1
    whole = {(0, 0, basis, bucket) for basis, bucket in itertools.product((0, 1), fine)}
    timed = {(0, 0, 0, sec, coarse) for sec, coarse in itertools.product(range(5), (160, 161, 175, 325))}
    envelopes = _envelopes(whole, timed)
    assert set(envelopes) == {(0, 0, 0), (0, 0, 1)}
    for ranges in envelopes.values():
        assert 1 <= len(ranges) <= ENVELOPE_RANGES
        assert ranges == sorted(ranges) and all(a[1] < b[0] for a, b in itertools.pairwise(ranges))
    for unit, metric, basis, bucket in whole:
        low, high = bucket_bounds(bucket)
        assert _inside(low, envelopes[(unit, metric, basis)]) and _inside(high, envelopes[(unit, metric, basis)])
    for unit, metric, basis, _sec, coarse in timed:
        low = bucket_bounds(coarse << SECOND_SHIFT)[0]
        high = bucket_bounds(((coarse + 1) << SECOND_SHIFT) - 1)[1]
        assert _inside(low, envelopes[(unit, metric, basis)]) and _inside(high, envelopes[(unit, metric, basis)])


def test_the_gap_between_the_median_and_a_far_tail_is_left_out() -> None:
    median, tail = 1280, 2560  # buckets of ~1 µs and of ~1 s: 2^10 and 2^20 ns at 128 buckets per doubling
    (ranges,) = _envelopes({(0, 0, 0, median), (0, 0, 0, median + 1), (0, 0, 0, tail)}, set(), limit=2).values()
    assert len(ranges) == 2
    assert _inside(1030, ranges) and not _inside(30_000, ranges) and _inside(bucket_bounds(tail)[0] + 1, ranges)


def test_more_ranges_than_the_limit_join_the_closest_first() -> None:
    buckets = {(0, 0, 0, b) for b in (1280, 1300, 1500, 2000)}  # 1300 is nearest to 1280 (by ratio)
    (ranges,) = _envelopes(buckets, set(), limit=3).values()
    assert len(ranges) == 3
    assert ranges[0] == (bucket_bounds(1280)[0], bucket_bounds(1300)[1])
