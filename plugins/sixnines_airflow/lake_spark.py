"""SparkSubmitOperator for jobs that read and write the lake: on an S3 lake it also hands spark-submit what
s3a needs, resolved when the task runs (never at parse time).

- `--jars`: hadoop-aws and the AWS SDK bundle matching the pyspark Hadoop (bench_tasks.lake.s3a_jars, fetched once
  into the cache);
- `--conf`: the non-secret s3a settings (implementation, endpoint, path-style access, region);
- the credentials from the lake's Airflow connection (`SIXNINES_LAKE_CONN_ID`) as the driver's AWS environment
  variables, never as command-line arguments; the driver (spark_jobs.session.get_spark) puts them into the
  session's Hadoop configuration, which Spark ships to executors with each file scan and write.
A local lake changes nothing.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from .runtime import lake_root


class LakeSparkSubmitOperator(SparkSubmitOperator):
    """A SparkSubmitOperator that reaches an S3 lake (see the module docstring)."""

    def execute(self, context: Any) -> None:
        from bench_tasks import CONN_ID_ENV, S3Path

        root = lake_root()
        if isinstance(root, S3Path):
            from bench_tasks import s3a_jars

            settings = root.settings
            jars = [str(j) for j in s3a_jars()]
            self.jars = ",".join([*([self.jars] if self.jars else []), *jars])
            self.conf = {**(self.conf or {}), **settings.spark_conf()}
            # The driver takes the credentials from its environment, not from the connection again.
            self.env_vars = {**(self.env_vars or {}), **settings.environment(), CONN_ID_ENV: ""}
            self.log.info(
                "lake %s: s3a through %s (%s), %d jar(s)",
                root,
                settings.endpoint_url or "AWS",
                settings.source,
                len(jars),
            )
        return super().execute(context)
