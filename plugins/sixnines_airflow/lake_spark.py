"""SparkSubmitOperator for jobs that read and write the lake: on an S3 lake it also hands spark-submit what
s3a needs, resolved when the task runs (never at parse time).

- `--jars`: hadoop-aws and the AWS SDK bundle matching the pyspark Hadoop (bench_tasks.lake.s3a_jars, fetched once
  into the cache);
- `--conf`: the non-secret s3a settings (implementation, endpoint, path-style access, region);
- the credentials from the lake's Airflow connection (`SIXNINES_LAKE_CONN_ID`) as the driver's AWS environment
  variables, never as command-line arguments; the driver (spark_jobs.session.get_spark) puts them into the
  session's Hadoop configuration, which Spark ships to executors with each file scan and write, and hands them
  to the cell pass' tasks with the task's function (spark_jobs.cellpass.route.analyze_cells).
A local lake changes nothing.

On a YARN or Kubernetes master the Spark provider does not give `env_vars` to the process: it writes each one
as a `--conf spark.yarn.appMasterEnv.K=V` / `spark.kubernetes.driverEnv.K=V` argument, which the submit log
and the host's process table show. So there the credentials are refused with a clear error, unless
`SIXNINES_LAKE_SPARK_CREDENTIALS=cluster` says the cluster brings its own (an instance profile, a web identity,
a Kubernetes secret through `spark.kubernetes.driver.secretKeyRef.*` and `…executor.secretKeyRef.*`): then
none are handed over, only the endpoint and region, and s3a's and pyarrow's default chains find the cluster's,
on the driver and on every executor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

from .runtime import lake_root

CREDENTIALS_ENV = "SIXNINES_LAKE_SPARK_CREDENTIALS"
CREDENTIAL_SOURCES = ("hand", "cluster")  # hand: this task gives the driver the lake's; cluster: it has its own
CREDENTIAL_VARS = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})


def env_on_command_line(master: str) -> bool:
    """The masters for which the Spark provider turns `env_vars` into `--conf` arguments (its own test)."""
    return "yarn" in master or "k8s" in master


def driver_environment(environment: Mapping[str, str], master: str, source: str) -> dict[str, str]:
    """The AWS variables the driver may be handed as `env_vars` on `master`, credentials by `source` (see the
    module docstring); an error rather than a secret on a command line."""
    from bench_tasks import StorageError

    if source not in CREDENTIAL_SOURCES:
        raise StorageError(f"{CREDENTIALS_ENV}={source!r}: expected one of {', '.join(CREDENTIAL_SOURCES)}")
    if source == "cluster":
        return {k: v for k, v in environment.items() if k not in CREDENTIAL_VARS}
    secrets = sorted(CREDENTIAL_VARS & environment.keys())
    if secrets and env_on_command_line(master):
        raise StorageError(
            f"Spark master {master!r}: the lake's credentials ({', '.join(secrets)}) would become --conf "
            "arguments of spark-submit, shown in its log and the process table; give the cluster its own "
            f"credentials (instance profile, web identity, a Kubernetes secret) and set {CREDENTIALS_ENV}=cluster, "
            "or run the analysis on a local or standalone master"
        )
    return dict(environment)


class LakeSparkSubmitOperator(SparkSubmitOperator):
    """A SparkSubmitOperator that reaches an S3 lake (see the module docstring)."""

    def execute(self, context: Any) -> None:
        from bench_tasks import S3Path

        root = lake_root()
        if isinstance(root, S3Path):
            self.reach_lake(root)
        return super().execute(context)

    def reach_lake(self, root: Any) -> None:
        """Jars, settings and (where no command line shows them) credentials for the S3 lake `root`."""
        from bench_tasks import s3a_jars

        settings = root.settings
        master, source = self.hand_settings(settings)
        jars = [str(j) for j in s3a_jars()]
        self.jars = ",".join([*([self.jars] if self.jars else []), *jars])
        self.log.info(
            "lake %s: s3a through %s (%s; credentials: %s), master %s, %d jar(s)",
            root,
            settings.endpoint_url or "AWS",
            settings.source,
            "the cluster's own" if source == "cluster" else "handed to the driver's environment",
            master,
            len(jars),
        )

    def hand_settings(self, settings: Any) -> tuple[str, str]:
        """The s3a settings as `--conf`, the AWS variables the master allows as `env_vars`; (master, source)."""
        from bench_tasks import CONN_ID_ENV

        source = os.environ.get(CREDENTIALS_ENV, "hand").strip() or "hand"
        master = self._get_hook()._connection["master"]  # the provider's own resolution of the connection
        # The driver takes the credentials from its environment, not from the connection again.
        env = {**driver_environment(settings.environment(), master, source), CONN_ID_ENV: ""}
        self.conf = {**(self.conf or {}), **settings.spark_conf()}
        self.env_vars = {**(self.env_vars or {}), **env}
        return master, source
