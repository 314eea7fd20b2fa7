"""The analysis task's spark-submit, read from the command the Spark provider really builds: a small run's driver
compiles with the JIT's first tier only, a large or unknown one with both (spark_jobs.launch.submit_conf)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import airflow.settings  # noqa: F401  Airflow's settings put the plugins folder (sixnines_airflow) on sys.path
import pytest

from spark_jobs.launch import FIRST_TIER_ONLY, JVM_OPTIONS, SECOND_TIER_THRIFT, SMALL_RUN_MESSAGES, driver_archive


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
    assert " ".join(SECOND_TIER_THRIFT) in command, command  # the second tier spent on the samples' code
    assert f"spark.executor.extraJavaOptions={JVM_OPTIONS}" in command and command.count("Tier4Invocation") == 1


def test_the_driver_and_executors_map_the_class_data_archive_once_it_is_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No flag while this installation has no archive (the JVMs start the slow way); the flag once it has one,
    for the driver and for the executors a cluster on this host starts."""
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    archive = driver_archive()
    assert archive is not None and archive.is_relative_to(tmp_path)
    assert "SharedArchiveFile" not in command_for(monkeypatch, 70_000)
    archive.parent.mkdir(parents=True)
    archive.write_bytes(b"made by spark_jobs.classdata")
    for messages in (70_000, None):
        command = command_for(monkeypatch, messages)
        assert f"spark.executor.extraJavaOptions={JVM_OPTIONS} -XX:SharedArchiveFile={archive}" in command, command
        assert command.count(f"-XX:SharedArchiveFile={archive}") == 2, command
