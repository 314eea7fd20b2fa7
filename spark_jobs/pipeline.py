"""One run's analysis end to end: percentile tables → Great Expectations gate → publish (or quarantine).

Airflow may call the three steps as separate tasks (`percentiles.run`, `gate`, `publish_run`); `run_analysis`
chains them for `sixnines analyze RUN_ID` and `spark-submit spark_jobs/pipeline.py --lake L --run-id R`.
Nothing is published unless every suite passes; otherwise the tables and the validation result go to
quarantine and GateError names the failed expectations (non-zero exit).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from spark_jobs import histogram, jobargs, lakeio, percentiles, timeline
from spark_jobs.errors import GateError
from spark_jobs.gate_frames import percentile_tables_frame, raw_cells_frame, raw_samples_frame
from spark_jobs.publish import publish, quarantine
from spark_jobs.samples import accounting, cell_facts


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
    raw: lakeio.Raw | None = None,
) -> GateReport:
    """Validate the run's raw samples, per-cell aggregates and percentile table (all must pass)."""
    from expectations import (
        build_percentile_tables_suite,
        build_raw_cells_suite,
        build_raw_samples_suite,
        validate,
    )

    raw = raw or lakeio.read_raw(spark, lake, [run.run_id])
    sent, received, cells = raw.sent, raw.received, raw.cells
    facts = cell_facts(cells).cache()
    frames = {
        "raw_samples": (raw_samples_frame(sent, received, facts), build_raw_samples_suite(thresholds.min_latency_ns)),
        "raw_cells": (
            raw_cells_frame(sent, accounting(sent, received, facts), facts),
            build_raw_cells_suite(thresholds.measure_tolerance, thresholds.allowed_loss_ratio),
        ),
        "percentile_tables": (
            percentile_tables_frame(lakeio.read_table(spark, lake, "percentiles", [run]), cells),
            build_percentile_tables_suite(),
        ),
    }
    report = GateReport(run.run_id, True)
    for name, (frame, suite) in frames.items():
        frame = frame.cache()
        outcome = validate(frame, suite)
        frame.unpersist()
        report.success &= outcome.success
        report.failed += [f"{name}: {f}" for f in outcome.failed]
        report.suites[name] = {"success": outcome.success, "evaluated": outcome.evaluated, "result": outcome.result}
    facts.unpersist()
    return report


def publish_run(spark: SparkSession, lake: lakeio.Lake, run: lakeio.RunRef, report: GateReport) -> Path:
    """Publish when the gate passed; otherwise quarantine and raise GateError naming what failed."""
    table = lakeio.read_table(spark, lake, "percentiles", [run]).toArrow()
    acc = lakeio.read_table(spark, lake, "accounting", [run]).toArrow().to_pylist()
    spread = lakeio.read_table(spark, lake, "repeat_spread", [run]).toArrow().to_pylist()
    if report.success:
        return publish(lake, run, table, acc, spread)
    validation = {"run_id": run.run_id, "success": False, "failed": report.failed, "suites": report.suites}
    folder = quarantine(lake, run, table.to_pylist(), acc, validation, spread)
    raise GateError(run.run_id, report.failed, str(folder))


def run_analysis(
    spark: SparkSession,
    lake: lakeio.Lake,
    run_id: str,
    thresholds: GateThresholds | None = None,
    extra_tables: bool = True,
) -> Path:
    """Percentiles (plus timeline and histogram tables), the gate, then publish. Returns the published folder."""
    raw = lakeio.read_raw(spark, lake, [run_id]).cache()
    try:
        percentiles.run(spark, lake, [run_id], raw)
        if extra_tables:
            timeline.run(spark, lake, [run_id], raw)
            histogram.run(spark, lake, [run_id], raw)
        report = gate(spark, lake, raw.runs[0], thresholds or GateThresholds(), raw)
    finally:
        raw.unpersist()
    return publish_run(spark, lake, raw.runs[0], report)


def main(argv: Sequence[str] | None = None) -> int:
    from spark_jobs.session import get_spark

    p = jobargs.parser(__doc__.splitlines()[0])
    p.add_argument("--measure-tolerance", type=float, default=GateThresholds.measure_tolerance)
    p.add_argument("--allowed-loss-ratio", type=float, default=GateThresholds.allowed_loss_ratio)
    args = p.parse_args(argv)
    spark = get_spark("sixnines-pipeline", args.master, lake=args.lake)
    thresholds = GateThresholds(args.measure_tolerance, args.allowed_loss_ratio)
    for run_id in args.run_ids:
        try:
            print(f"published: {run_analysis(spark, args.lake, run_id, thresholds)}")
        except GateError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
