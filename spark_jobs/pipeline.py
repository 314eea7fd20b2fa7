"""One run's analysis end to end, as one Spark application: every table → Great Expectations gate → publish
(or quarantine), and any comparisons asked for.

`run_analysis` serves `sixnines analyze RUN_ID`, Airflow's `analysis` task and
`spark-submit spark_jobs/pipeline.py --lake L --run-id R [--compare AXIS[:BASELINE_RUN]]`. One analysis
(spark_jobs.cellpass: a Python task per cell, local lake or S3) feeds six tables and the gate's
frames, all built on the driver in pandas (the analysis is a few small frames there); the faults table comes from
the cells rows (spark_jobs.faults), and the comparison tables
(spark_jobs.compare) read the percentile tables just written. Nothing is published unless every suite passes;
otherwise the tables and the validation result go to quarantine and GateError names the
failed expectations (non-zero exit). `timings` (when given) receives each step's wall seconds.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession

from spark_jobs import capacity, compare, faults, histogram, jobargs, lakeio, percentiles, timeline
from spark_jobs.analysis import Analysis
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.codegen import interpreted
from spark_jobs.errors import CompareError, GateError
from spark_jobs.gate_frames import faults_frame, percentile_tables_frame, raw_cells_frame, raw_producers_frame
from spark_jobs.gateproc import GateProcess, validate_frame
from spark_jobs.publish import publish, quarantine

# Tables published beside the percentiles as CSV when they have rows (publish.csv_tables).
CSV_TABLES = ("faults", "capacity", "capacity_steps")


@dataclass(frozen=True)
class GateThresholds:
    """The gate's parameters (the lag limit is each cell's own max_schedule_lag_ms from its spec)."""

    measure_tolerance: float = 0.01  # measure-phase sends within 1 % of rate × measure seconds
    allowed_loss_ratio: float = 0.0  # where delivery is not guaranteed; guaranteed cells allow none
    min_latency_ns: int = 0


@dataclass
class GateReport:
    run_id: str
    success: bool
    failed: list[str] = field(default_factory=list)
    suites: dict[str, dict] = field(default_factory=dict)


def gate(
    spark: SparkSession,
    lake: lakeio.Lake,
    run: lakeio.RunRef,
    thresholds: GateThresholds,
    result: Analysis | None = None,
    tables: Mapping[str, pa.Table] | None = None,
    worker: GateProcess | None = None,
) -> GateReport:
    """Validate the run's raw samples (per producer), per-cell aggregates, percentile table and faults table
    (all must pass). The frames are small; GX checks them in pandas, in `worker` when given. `tables`: the run's
    tables as just written (else they are read from the lake)."""
    if result is None:
        result = analyze_raw(spark, lakeio.read_raw(spark, lake, [run.run_id]))

    def written(name: str) -> pd.DataFrame:
        return _run_table(lake, run, tables, name).to_pandas()

    pandas = {
        "raw_samples": (raw_producers_frame(result), (thresholds.min_latency_ns,)),
        "raw_cells": (raw_cells_frame(result), (thresholds.measure_tolerance, thresholds.allowed_loss_ratio)),
        "percentile_tables": (percentile_tables_frame(written("percentiles"), _cells(lake, run)), ()),
        "faults": (faults_frame(written("faults")), ()),
    }
    outcomes = worker.validate(pandas) if worker is not None else _validate_here(pandas)
    report = GateReport(run.run_id, True)
    for name, outcome in outcomes.items():
        report.success &= outcome["success"]
        report.failed += [f"{name}: {f}" for f in outcome["failed"]]
        report.suites[name] = {k: outcome[k] for k in ("success", "evaluated", "result")}
    return report


def _validate_here(frames: dict[str, tuple[Any, tuple[Any, ...]]]) -> dict[str, dict[str, Any]]:
    """The gate's suites run in this process (gate() called without a worker, as tests do)."""
    return {name: validate_frame(frame, name, args) for name, (frame, args) in frames.items()}


def _run_table(lake: lakeio.Lake, run: lakeio.RunRef, tables: Mapping[str, pa.Table] | None, name: str) -> pa.Table:
    """Table `name` of `run`: from the written `tables` (no file listing), or read from the lake."""
    return lakeio.table_rows(lake, name, run) if tables is None else lakeio.run_rows(tables[name], run)


def _cells(lake: lakeio.Lake, run: lakeio.RunRef) -> pd.DataFrame:
    return lakeio.cells_table(lake, [run]).to_pandas()


def publish_run(
    lake: lakeio.Lake,
    run: lakeio.RunRef,
    report: GateReport,
    tables: Mapping[str, pa.Table] | None = None,
) -> Path:
    """Publish when the gate passed; otherwise quarantine and raise GateError naming what failed. `tables`: the
    run's tables as just written (else they are read from the lake)."""

    def rows(name: str) -> pa.Table:
        return _run_table(lake, run, tables, name)

    table = rows("percentiles")
    acc, spread = rows("accounting").to_pylist(), rows("repeat_spread").to_pylist()
    more = {name: rows(name).to_pylist() for name in CSV_TABLES}
    if report.success:
        return publish(lake, run, table, acc, spread, more)
    validation = {"run_id": run.run_id, "success": False, "failed": report.failed, "suites": report.suites}
    folder = quarantine(lake, run, table.to_pylist(), acc, validation, spread, more)
    raise GateError(run.run_id, report.failed, str(folder))


@dataclass(frozen=True)
class Comparison:
    """A comparison table to write with the run: along `axis`, against `baseline` (None: within the run)."""

    axis: str
    baseline: str | None = None

    @classmethod
    def parse(cls, text: str) -> Comparison:
        """`AXIS` or `AXIS:BASELINE_RUN_ID` (a run id may itself hold colons; an axis never does)."""
        axis, _, baseline = text.partition(":")
        return cls(axis, baseline or None)


@contextmanager
def _timed(timings: dict[str, float] | None, step: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        if timings is not None:
            timings[step] = round(time.perf_counter() - started, 3)


def _written(lake: lakeio.Lake, runs: list[lakeio.RunRef], built: Mapping[str, pa.Table]) -> dict[str, pa.Table]:
    """Write tables built on the driver; returns them as written."""
    lakeio.write_collected(lake, runs, built)
    return dict(built)


def write_all(
    spark: SparkSession,
    lake: lakeio.Lake,
    raw: lakeio.Raw,
    extra_tables: bool = True,
    comparisons: Sequence[Comparison] = (),
    timings: dict[str, float] | None = None,
) -> tuple[Analysis, dict[str, pa.Table]]:
    """Analyze `raw` once and write every table of its runs (and the comparisons of its last run). Returns the
    analysis and the tables as written (all runs' rows), for the gate and publishing."""
    with _timed(timings, "passes"):
        result = analyze_raw(spark, raw)
    builders: dict[str, Callable[[], Mapping[str, pa.Table]]] = {
        "percentile tables": lambda: percentiles.tables(result),
        "faults": lambda: {"faults": faults.faults_table(raw.cells.toArrow())},  # local data: no job
        "capacity": lambda: capacity.capacity_tables(lake, raw.runs),
    }
    if extra_tables:
        builders["timeline"] = lambda: {"timeline": timeline.timeline_table(result)}
        builders["histogram"] = lambda: {"histogram": histogram.histogram_table(result)}
    collected: dict[str, pa.Table] = {}
    with _timed(timings, "write tables"):  # each builder's own seconds under its name, inside this step
        for step, build in builders.items():
            with _timed(timings, step):
                collected |= _written(lake, raw.runs, build())
    for comparison in comparisons:
        run_id = raw.runs[-1].run_id
        with _timed(timings, f"compare {comparison.axis}"):
            compare.run(lake, comparison.baseline or run_id, run_id, comparison.axis)
    return result, collected


def run_analysis(
    spark: SparkSession,
    lake: lakeio.Lake,
    run_id: str,
    thresholds: GateThresholds | None = None,
    extra_tables: bool = True,
    comparisons: Sequence[Comparison] = (),
    timings: dict[str, float] | None = None,
) -> Path:
    """Every table (percentiles, plus timeline and histogram), any comparisons, the gate, then publish.
    Returns the published folder. On a local master the analysis holds this host against cells meanwhile
    (host_held)."""
    with host_held(spark, run_id):
        worker = GateProcess()  # imports GX in its own process meanwhile
        try:
            with interpreted(spark):  # the few queries over raw rows switch to compiled code (spark_jobs.codegen)
                with _timed(timings, "read"):
                    raw = lakeio.read_raw(spark, lake, [run_id])
                result, tables = write_all(spark, lake, raw, extra_tables, comparisons, timings)
            with _timed(timings, "gate"):
                report = gate(spark, lake, raw.runs[0], thresholds or GateThresholds(), result, tables, worker)
            with _timed(timings, "publish"):
                return publish_run(lake, raw.runs[0], report, tables)
        finally:
            worker.close()


def host_held(spark: SparkSession, run_id: str) -> AbstractContextManager[None]:
    """Where Spark runs on this host (a `local` master), keep cells off it while the run is analysed
    (bench_tasks' host lease: a cell waits, and the analysis waits for a cell running): a sweep's analysis, or a
    backfill's next to a nightly run, would otherwise share the cores of another DAG's cell and show up in its
    latencies. A cluster's executors run elsewhere and hold nothing here."""
    if not spark.sparkContext.master.startswith("local"):
        return nullcontext()
    from bench_tasks import host_for_analysis

    def waiting(why: str) -> None:
        print(f"waiting: {why}", file=sys.stderr, flush=True)

    return host_for_analysis(run_id, poll_s=5.0, on_wait=waiting)


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    p = jobargs.parser(__doc__.splitlines()[0])
    p.add_argument("--measure-tolerance", type=float, default=GateThresholds.measure_tolerance)
    p.add_argument("--allowed-loss-ratio", type=float, default=GateThresholds.allowed_loss_ratio)
    p.add_argument(
        "--compare",
        action="append",
        default=[],
        metavar="AXIS[:BASELINE_RUN]",
        help="also write the comparison along AXIS (run, version, a spec path) against BASELINE_RUN or, "
        "without one, between the run's own cells; repeatable",
    )
    args = p.parse_args(argv)
    spark = get_spark("sixnines-pipeline", args.master, lake=args.lake)
    thresholds = GateThresholds(args.measure_tolerance, args.allowed_loss_ratio)
    comparisons = [Comparison.parse(c) for c in args.compare]
    for run_id in args.run_ids:
        timings: dict[str, float] = {}
        try:
            folder = run_analysis(spark, args.lake, run_id, thresholds, comparisons=comparisons, timings=timings)
            print(f"published: {folder}")
        except (GateError, CompareError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            print(f"{run_id}: seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
