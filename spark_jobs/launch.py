"""Spark settings that must be known when the driver JVM starts, shared by every way a job is launched: a
session the jobs start themselves (spark_jobs.session) and spark-submit from Airflow (plugins' tail).

Kept free of pyspark so DAG files can import it at parse time.
"""

from __future__ import annotations

# The analysis is a throughput job: the parallel collector cost 10-15 % less CPU than G1 here (bench/).
JVM_OPTIONS = "-XX:+UseParallelGC"

SUBMIT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.driver.extraJavaOptions": JVM_OPTIONS,
    "spark.executor.extraJavaOptions": JVM_OPTIONS,
    # An analysis compiles 300-400 classes of generated code; Spark keeps 100 by default, so a second run in
    # the same application (several runs per submit, the benchmark's sizes) compiled, and the JVM warmed up,
    # nearly all of them again. A static setting: known when the session starts.
    "spark.sql.codegen.cache.maxEntries": "2000",
}
