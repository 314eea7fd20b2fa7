"""Suite over the percentile table before it is published (spark_jobs.gate_frames.percentile_tables_frame).

- The distribution is non-decreasing: min ≤ p50 ≤ … ≤ p99.9999 ≤ max, an unsupported percentile standing
  in as the max (`<p>_or_max` columns), so the chain holds across the null suffix too.
- A percentile is null exactly when the count cannot support it (fewer than 1/(1−p) samples).
- The message counts equal the raw counts the generator recorded in cells.parquet (`raw_*` columns), and
  each overall sample count equals the received (e2e) or acknowledged (publish, rtt) count.
"""

from __future__ import annotations

import itertools

import great_expectations as gx
import great_expectations.expectations as gxe
from great_expectations.expectations.row_conditions import Column

from bench_tasks import PERCENTILES, required_samples
from spark_jobs.exact import percentile_column

COUNT_COLUMNS = ("scheduled", "sent", "acknowledged", "received", "lost", "duplicated")


def build_percentile_tables_suite(percentiles: tuple[str, ...] = PERCENTILES) -> gx.ExpectationSuite:
    """3 × len(percentiles) + 1 + len(COUNT_COLUMNS) + 2 expectations (asserted by a unit test)."""
    expectations: list[gxe.Expectation] = []
    chain = ["min_ns", *[f"{percentile_column(p)}_or_max" for p in percentiles], "max_ns"]
    for low, high in itertools.pairwise(chain):
        expectations.append(gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A=high, column_B=low, or_equal=True))
    for p in percentiles:
        enough = required_samples(p)
        column = percentile_column(p)
        expectations.append(gxe.ExpectColumnValuesToBeNull(column=column, row_condition=Column("count") < enough))
        expectations.append(gxe.ExpectColumnValuesToNotBeNull(column=column, row_condition=Column("count") >= enough))
    for column in COUNT_COLUMNS:
        expectations.append(
            gxe.ExpectColumnPairValuesToBeEqual(column_A=column, column_B=f"raw_{column}", ignore_row_if="neither")
        )
    overall = Column("leader").is_null()
    expectations.append(
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="count", column_B="raw_received", row_condition=overall & (Column("metric") == "e2e")
        )
    )
    expectations.append(
        gxe.ExpectColumnPairValuesToBeEqual(
            column_A="count",
            column_B="raw_acknowledged",
            row_condition=overall & Column("metric").is_in(["publish", "rtt"]),
        )
    )
    return gx.ExpectationSuite(name="percentile_tables", expectations=expectations)
