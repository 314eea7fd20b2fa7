"""One small SparkSession for the jobs: sized for a shared 2-core host unless told otherwise.

`local[*]` is the default master; `--master` (or SparkSubmitOperator's connection) points the same code at a
cluster: under spark-submit the master it was given stands (the default would silently run a job submitted to
a cluster in local mode on the submitting host). Partition column inference is off so a cell id such as
`123456789012` stays a string.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
}


def get_spark(
    app_name: str = "sixnines", master: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """The active session if there is one (spark-submit, tests), else a new one with DEFAULT_CONF."""
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif SparkSession.getActiveSession() is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master("local[*]")  # not under spark-submit (it sets PYSPARK_GATEWAY_PORT and --master)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
