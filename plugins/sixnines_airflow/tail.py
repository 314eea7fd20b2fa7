"""A sweep's analysis tail, after its cells: every analytics table with the data-quality gate and publishing, as
one Spark application (`spark_jobs/pipeline.py` through `SparkSubmitOperator`), the regression check over the
published history, and the run's HTML report.

Every step runs whatever happened before it (`all_done`): a run whose gate refuses to publish still gets its
regression check (of what history it has) and its report, which shows the failed cells and why.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from airflow.sdk import get_current_context, task

from spark_jobs.launch import PIPELINE, SUBMIT_CONF, submit_conf

from .cell_tasks import phase_timeout
from .lake_spark import LakeSparkSubmitOperator
from .notifier import AnalysisFailureNotifier, RegressionAlertNotifier
from .runtime import lake_root, run_info

log = logging.getLogger("sixnines")
SPARK_CONN_ID = "spark_default"  # master local[*] by default (tools/airflow); any cluster through the connection
TAIL_FLOOR = timedelta(hours=1)


def tail_timeout(planned_s: float) -> timedelta:
    """The execution timeout of a task that reads what a run's cells wrote (tables, analysis, regressions,
    report): that grows with how long the cells ran (`planned_s`, their planned seconds, at the longest phase
    scale), and never less than an hour."""
    return max(TAIL_FLOOR, phase_timeout(planned_s))


def analysis_tail(planned_s: float) -> tuple[Any, Any]:
    """analysis → regressions → report, chained, each timed out for a run of `planned_s` planned seconds; the
    first and the last task."""
    timeout = tail_timeout(planned_s)
    first = analysis(timeout)
    last = first >> regressions.override(execution_timeout=timeout)() >> report.override(execution_timeout=timeout)()
    return first, last


class AnalysisSubmitOperator(LakeSparkSubmitOperator):
    """The analysis' spark-submit, its driver's JIT chosen when the task runs by the size of the run, which the
    `tables` task counted (spark_jobs.launch.submit_conf)."""

    def execute(self, context: Any) -> None:
        ti = context.get("ti")  # none when the operator is run by hand: the size is not known
        summary = (ti.xcom_pull(task_ids="tables") if ti is not None else None) or {}
        self.size_for(summary.get("messages"))
        return super().execute(context)

    def size_for(self, messages: int | None) -> None:
        """The launch settings for a run of `messages` measure-phase messages (None: not known)."""
        self.conf = {**(self.conf or {}), **submit_conf(messages)}
        self.log.info("run of %s messages: driver JVM options %s", messages, self.conf["spark.driver.extraJavaOptions"])


def analysis(timeout: timedelta = TAIL_FLOOR) -> LakeSparkSubmitOperator:
    """Every table (accounting, percentiles, repeats, timeline, histogram, faults) → Great Expectations gate → publish
    (or quarantine), for this run, as one Spark application (on an S3 lake with the s3a jars, settings and
    credentials: lake_spark.py)."""
    summary = "ti.xcom_pull(task_ids='tables')"
    return AnalysisSubmitOperator(
        task_id="analysis",
        application=str(PIPELINE),
        conn_id=SPARK_CONN_ID,
        name="sixnines-analysis",
        application_args=["--lake", f"{{{{ {summary}['lake'] }}}}", "--run-id", f"{{{{ {summary}['run_id'] }}}}"],
        conf=dict(SUBMIT_CONF),
        retries=0,
        trigger_rule="all_done",
        execution_timeout=timeout,
        on_failure_callback=AnalysisFailureNotifier(),
    )


@task(retries=0, trigger_rule="all_done", on_success_callback=RegressionAlertNotifier())
def regressions() -> dict[str, Any]:
    """Check this run against the published history; alerts are reported by the notifier on success. A run
    that was not published (its gate failed) or an empty history is logged, not an error of the sweep."""
    from bench_tasks import RegressionError
    from bench_tasks import detect_regressions as detect
    from bench_tasks import write_regression_results as write_results

    run = run_info(get_current_context())
    try:
        result = detect(lake_root(), run_id=run.run_id)
    except RegressionError as exc:
        log.warning("no regression check for run %s: %s", run.run_id, exc)
        return {"checked": False, "reason": str(exc)}
    path = write_results(lake_root(), result)
    for alert in result.alerts:
        log.error("regression: %s", alert.summary())
    log.info(
        "%d series checked, %d change point(s), %d alert(s): %s",
        result.series_checked,
        len(result.change_points),
        len(result.alerts),
        path,
    )
    return {"checked": True, "alerts": len(result.alerts), "change_points": len(result.change_points)}


@task(retries=1, trigger_rule="all_done")
def report() -> str:
    """The run's self-contained HTML report (lake/reports/run_date=D/run_id=R/report.html)."""
    from bench_tasks import build_run_report

    run = run_info(get_current_context())
    path = build_run_report(lake_root(), run.run_id)
    log.info("report: %s", path)
    return str(path)
