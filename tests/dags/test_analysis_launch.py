"""The analysis task's spark-submit, read from the command the Spark provider really builds: a small run's driver
compiles with the JIT's first tier only, a large or unknown one with both (spark_jobs.launch.submit_conf)."""

from __future__ import annotations

import json

import airflow.settings  # noqa: F401  Airflow's settings put the plugins folder (sixnines_airflow) on sys.path
import pytest

from spark_jobs.launch import FIRST_TIER_ONLY, JVM_OPTIONS, SMALL_RUN_MESSAGES


def command_for(monkeypatch: pytest.MonkeyPatch, messages: int | None) -> str:
    """The spark-submit command line of the analysis operator sized for a run of `messages`."""
    from sixnines_airflow.tail import analysis

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    op = analysis()
    op.size_for(messages)
    return " ".join(op._get_hook()._build_spark_submit_command("pipeline.py"))


@pytest.mark.parametrize("messages", [70_000, SMALL_RUN_MESSAGES])
def test_a_small_run_s_driver_stops_at_the_first_jit_tier(monkeypatch: pytest.MonkeyPatch, messages: int) -> None:
    command = command_for(monkeypatch, messages)
    assert f"spark.driver.extraJavaOptions={JVM_OPTIONS} {FIRST_TIER_ONLY}" in command, command
    assert f"spark.executor.extraJavaOptions={JVM_OPTIONS}" in command  # a cluster's executors keep the full JIT


@pytest.mark.parametrize("messages", [SMALL_RUN_MESSAGES + 1, 30_000_000, None])
def test_a_large_or_unknown_run_keeps_the_full_jit(monkeypatch: pytest.MonkeyPatch, messages: int | None) -> None:
    command = command_for(monkeypatch, messages)
    assert f"spark.driver.extraJavaOptions={JVM_OPTIONS}" in command and FIRST_TIER_ONLY not in command, command
