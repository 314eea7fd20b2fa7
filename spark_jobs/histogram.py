"""Histogram job: log-spaced latency buckets per cell × metric × basis (measure phase), for plots.

Bucket b holds latencies in [2^(b/16), 2^((b+1)/16)) ns — 16 buckets per doubling, each about 4.4 % wide,
the same relative resolution from microseconds to seconds; latencies below 1 ns (0) go to bucket -1, whose
bounds are [0, 1). A plain aggregation, so it merges across runs by summing counts. Plots only: the
percentile tables are exact and never read from here.
Run alone: `spark-submit spark_jobs/histogram.py --lake LAKE --run-id RUN`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs import jobargs, lakeio
from spark_jobs.analysis import Analysis
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.exact import BUCKET_BITS
from spark_jobs.localdata import arrow_table
from spark_jobs.metrics import LAG, basis_names, metric_names
from spark_jobs.percentiles import NAMED_FIELDS, TABLES_SCHEMA_VERSION, VERSION_FIELD, key_fields, merged_facts
from spark_jobs.samples import MERGED_KEYS

BUCKETS_PER_DOUBLING = 16
_SHIFT = BUCKET_BITS - 4  # exact.log_bucket >> _SHIFT is floor(log2(v) · 16) (see exact.log_bucket)
HISTOGRAM_SCHEMA = pa.schema(
    [
        VERSION_FIELD,
        *key_fields(MERGED_KEYS),
        *NAMED_FIELDS,
        pa.field("bucket", pa.int32()),
        pa.field("lower_ns", pa.float64()),
        pa.field("upper_ns", pa.float64()),
        pa.field("count", pa.int64()),
        pa.field("cumulative_fraction", pa.float64()),
    ]
)


def histogram_table(result: Analysis) -> pa.Table:
    """Counts per bucket, with each bucket's bounds and the cumulative fraction up to its upper bound: the
    analysis' bucket table summed (measure phase, a repeated cell's repeats in one histogram)."""
    measured = result.measured[result.measured["metric"] != LAG]
    fine = measured["bucket"].to_numpy(np.int64)
    coarse = np.where(fine < 0, -1, fine >> _SHIFT)
    per_cell = measured.assign(bucket=coarse).groupby(["cell_ix", "metric", "basis", "bucket"])["n"].sum()
    cells = merged_facts(result.facts)[[*MERGED_KEYS, "cell_ix"]]
    counts = per_cell.rename("count").reset_index().merge(cells, on="cell_ix")
    counts = counts.sort_values([*MERGED_KEYS, "metric", "basis", "bucket"], ignore_index=True)
    group = counts.groupby([*MERGED_KEYS, "metric", "basis"], sort=False)["count"]
    bucket = counts["bucket"].to_numpy(np.int64)
    k = float(BUCKETS_PER_DOUBLING)
    table = counts.assign(
        schema_version=TABLES_SCHEMA_VERSION,
        metric=metric_names(counts["metric"]),
        basis=basis_names(counts["basis"]),
        lower_ns=np.where(bucket < 0, 0.0, np.power(2.0, bucket / k)),
        upper_ns=np.where(bucket < 0, 1.0, np.power(2.0, (bucket + 1) / k)),
        cumulative_fraction=group.cumsum() / group.transform("sum"),
    )
    return arrow_table(table, HISTOGRAM_SCHEMA)


def run(spark: SparkSession, lake: lakeio.Lake, run_ids: Sequence[str], raw: lakeio.Raw | None = None) -> list[Path]:
    """Compute the table of the runs (from `raw` when already read) and write one partition per run."""
    raw = raw or lakeio.read_raw(spark, lake, list(run_ids))
    table = histogram_table(analyze_raw(spark, raw))
    return lakeio.write_collected(lake, raw.runs, {"histogram": table})["histogram"]


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    args = jobargs.parse(__doc__.splitlines()[0], argv)
    for path in run(get_spark("sixnines-histogram", args.master, lake=args.lake), args.lake, args.run_ids):
        print(f"histogram: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
