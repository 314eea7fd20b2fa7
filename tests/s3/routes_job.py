"""Both analysis routes over one S3 lake, in a process of its own (tests/s3/test_cellpass_s3.py,
bench/s3_routes.py): its JVM must start with the s3a jars for the Spark SQL passes, which a test session whose
Spark tests already started a JVM cannot give.

    python -m tests.s3.routes_job LAKE RUN_ID OUT EVENTS [--routes cells,sql]

writes to the local folder OUT each frame of the cell pass' Analysis (`cells-*.parquet`), the Spark SQL passes'
(`sql-*.parquet`) and the session's whole configuration (`conf.json`: the context's and the SQL session's), with
Spark's event log in EVENTS, and prints each route's wall seconds (`seconds: ROUTE S`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bench_tasks.lake.storage import lake_path
from spark_jobs import lakeio
from spark_jobs.analysis import Analysis, analyze
from spark_jobs.cellpass.route import analyze_raw
from spark_jobs.session import get_spark

FRAMES = ("summary", "measured", "done")
ROUTES: dict[str, Callable[..., Analysis]] = {
    "cells": lambda spark, raw: analyze_raw(spark, raw),
    "sql": lambda spark, raw: analyze(raw.sent, raw.received, raw.cells),
}


def frames(result: Analysis) -> dict[str, pd.DataFrame]:
    """The Analysis' frames the tables are built from, the ledger's two included."""
    out = {name: getattr(result, name) for name in FRAMES}
    return {**out, "producers": result.ledger.producers, "accounting": result.ledger.accounting}


def main(location: str, run_id: str, out: Path, events: Path, routes: list[str]) -> None:
    """The lake's settings are resolved first (from the lake's Airflow connection, as the test gives them);
    then every variable that could reach the bucket leaves the environment before the JVM starts, so its Python
    workers, like a cluster's executors, have nothing of the lake but what the driver hands its tasks."""
    lake = lake_path(location)
    for name in [n for n in os.environ if n.startswith(("AWS_", "AIRFLOW_CONN_"))]:
        del os.environ[name]
    conf = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()}
    spark = get_spark("sixnines-routes-s3", "local[2]", conf, lake=lake)
    try:
        raw = lakeio.read_raw(spark, lake, [run_id])
        for route in routes:
            began = time.monotonic()
            result = ROUTES[route](spark, raw)
            print(f"seconds: {route} {time.monotonic() - began:.2f}", flush=True)
            for name, frame in frames(result).items():
                frame.to_parquet(out / f"{route}-{name}.parquet")
        settings = {"context": dict(spark.sparkContext.getConf().getAll()), "session": spark.conf.getAll}
        (out / "conf.json").write_text(json.dumps(settings, indent=1, sort_keys=True))
    finally:
        spark.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for arg in ("lake", "run_id"):
        parser.add_argument(arg)
    for arg in ("out", "events"):
        parser.add_argument(arg, type=Path)
    parser.add_argument("--routes", default="cells,sql", help="comma-separated, in order: cells, sql")
    args = parser.parse_args(sys.argv[1:])
    main(args.lake, args.run_id, args.out, args.events, args.routes.split(","))
