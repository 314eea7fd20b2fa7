"""One small SparkSession for the jobs: sized for a shared 2-core host unless told otherwise.

`local[*]` is the default master; `--master` (or SparkSubmitOperator's connection) points the same code at a
cluster: under spark-submit the master it was given stands (the default would silently run a job submitted to
a cluster in local mode on the submitting host). Partition column inference is off so a cell id such as
`123456789012` stays a string.

For a lake on S3 (`lake=s3://…`) the session reads and writes `s3a://`: hadoop-aws and the AWS SDK bundle
(bench_tasks.lake.s3a_jars) go on the classpath when this call starts the JVM (spark-submit passes them as `--jars`
instead), the endpoint and path style as configuration, and the credentials straight into the running
context's Hadoop configuration, so they never appear on a command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from bench_tasks.lake.s3conf import S3Settings
from bench_tasks.lake.storage import S3Path, lake_path
from spark_jobs.launch import submit_conf

DEFAULT_CONF: dict[str, str] = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
}


def get_spark(
    app_name: str = "sixnines",
    master: str | None = None,
    conf: dict[str, str] | None = None,
    lake: str | Path | S3Path | None = None,
) -> SparkSession:
    """The active session if there is one (spark-submit, tests), else a new one with DEFAULT_CONF and the launch
    settings (spark_jobs.launch.submit_conf); configured for `lake` when it is on S3."""
    root = lake_path(lake) if lake is not None else None
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif SparkSession.getActiveSession() is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]")  # not under spark-submit (it sets PYSPARK_GATEWAY_PORT and --master)
    settings = root.settings if isinstance(root, S3Path) else None
    lake_conf = s3a_conf(settings) if settings is not None else {}
    _local_python(master)
    for key, value in {**DEFAULT_CONF, **submit_conf(), **lake_conf, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if settings is not None:
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        for key, value in {**settings.spark_conf(), **settings.hadoop_secrets()}.items():
            hadoop.set(key.removeprefix("spark.hadoop."), value)
    return spark


def _local_python(master: str | None) -> None:
    """On a local master the Python workers are this interpreter (spark_jobs.cellpass runs its tasks in them,
    with numpy and pyarrow): PySpark's default is whatever `python3` PATH finds, which in a shell without the
    venv first has neither. PySpark reads it from the environment (PYSPARK_PYTHON) as the context starts.
    Under spark-submit no master is named here, and the same holds: the deployment's Spark workers run the
    image the driver runs (docker-compose.yaml), so the interpreter's path is theirs too. A PYSPARK_PYTHON
    already set wins."""
    if (master or "local").startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def s3a_conf(settings: S3Settings) -> dict[str, str]:
    """Launch configuration for an S3 lake: the s3a jars (unless spark-submit was given them) and the
    non-secret s3a settings."""
    from bench_tasks.lake.s3a_jars import spark_jars_conf

    conf = dict(settings.spark_conf())
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # a JVM started here; under spark-submit it has its --jars
        conf["spark.jars"] = spark_jars_conf()
    return conf
