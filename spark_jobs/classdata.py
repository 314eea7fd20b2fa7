"""Make this installation's Spark driver class-data archive (bench_tasks.classdata), once: `make` runs
`python -m spark_jobs.classdata`, which does nothing when the archive for this pyspark and this `java` exists.

The archive holds the classes a driver loaded while it ran `train`: a small lake written and read back as the
analysis reads raw Parquet (file metadata, a broadcast join of local data), grouping-set and window aggregations,
an explode, and results collected as Arrow, so most of what an analysis loads is mapped rather than loaded at its
start. Whatever the training missed loads as it would without an archive.

    python -m spark_jobs.classdata           make the archive if it is missing (spark-submit, ~30 s)
    spark-submit spark_jobs/classdata.py --train DIR   the training run itself
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_tasks.classdata import dump

REPO = Path(__file__).resolve().parents[1]


def train(folder: Path) -> None:
    """Representative work for the archive: the kinds of plans an analysis runs, on a few thousand rows."""
    import pyarrow as pa
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from spark_jobs.session import get_spark

    spark = get_spark("sixnines-classdata", master="local[2]")
    rows = spark.range(20_000).select(
        (F.col("id") % 4).alias("unit"),
        (F.col("id") % 3).cast("int").alias("metric"),
        (F.rand(7) * 1e6).cast("long").alias("value_ns"),
        F.col("id").alias("seq"),
    )
    rows.write.mode("overwrite").partitionBy("unit").parquet(str(folder / "raw"))
    raw = spark.read.parquet(str(folder / "raw")).select("*", "_metadata.file_size")
    units = spark.createDataFrame(pa.table({"unit": [0, 1, 2, 3], "t0_ns": [0, 10, 20, 30]}))
    joined = raw.join(F.broadcast(units), "unit").withColumn(
        "bucket", F.floor(F.log2(F.col("value_ns") + 1) * 16).cast("long")
    )
    exploded = joined.select("*", F.explode(F.array(F.lit(0), F.lit(1))).alias("basis"))
    sums = exploded.groupingSets([("unit", "metric", "bucket"), ("unit", "basis")], "unit", "metric", "bucket", "basis")
    sums.agg(F.count("*").alias("n"), F.min("value_ns"), F.max("value_ns"), F.sum("value_ns")).toArrow()
    ranked = joined.withColumn("rank", F.row_number().over(Window.partitionBy("unit").orderBy("value_ns")))
    ranked.where(F.col("rank") <= 5).toPandas()
    joined.groupBy("unit").agg(F.percentile_approx("value_ns", 0.5)).write.mode("overwrite").parquet(
        str(folder / "tables")
    )
    spark.stop()


def make_archive() -> int:
    """Make the archive with a training spark-submit unless it exists; 0 either way (an archive is a speed-up,
    so a failure to make one is reported, not an error of the set-up)."""
    from spark_jobs.launch import JVM_OPTIONS, driver_archive

    archive = driver_archive()
    if archive is None or archive.is_file():
        return 0
    print(f"making the Spark driver's class-data archive {archive.name} (once, ~30 s)", flush=True)

    def run(flags: tuple[str, ...]) -> None:
        with tempfile.TemporaryDirectory(prefix="sixnines-classdata-") as folder:
            options = " ".join((JVM_OPTIONS, *flags))
            submit = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]"]
            command = [*submit, "--conf", f"spark.driver.extraJavaOptions={options}", __file__, "--train", folder]
            env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"the training run exited {done.returncode}:\n{done.stderr[-3000:]}", file=sys.stderr)

    try:
        made = dump(archive, run)
    except OSError as exc:  # e.g. an installation this user cannot write to (a system-wide Python)
        print(f"cannot write {archive}: {exc}", file=sys.stderr)
        made = False
    if not made:
        print("no class-data archive was made: Spark drivers start without one", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, help="run the training work in this folder (under spark-submit)")
    args = parser.parse_args(argv)
    if args.train is not None:
        train(args.train)
        return 0
    return make_archive()


if __name__ == "__main__":
    sys.exit(main())
