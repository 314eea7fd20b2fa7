"""RabbitMQ's PerfTest as `bench/native_compare.py`'s RabbitMQ rows run it (fetched from Maven Central into the
cache), against a real node whose user has a password: it logs in, measures both its latencies, and the
credentials are on no command line and in no output it hands back."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import native_rabbitmq
from bench_tasks.systems.rabbitmq.nodes import RabbitCluster
from bench_tasks.systems.rabbitmq.settings import RabbitmqBroker

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]


def test_perf_test_measures_with_the_cells_login_kept_off_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(cmd: list[str], *args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(native_rabbitmq.subprocess, "run", recording_run)
    with RabbitCluster("latest", RabbitmqBroker(), tmp_path) as cluster:
        assert cluster.endpoint is not None
        client = {"username": cluster.user.username, "password": cluster.user.password}
        run = native_rabbitmq.run_perf_test(cluster.endpoint.url, client, 3)
    for kind in ("consumer", "confirm"):
        assert 0 < run[kind]["min_ms"] <= run[kind]["p50_ms"] <= run[kind]["p99_ms"]
    perf_test = [cmd for cmd in commands if native_rabbitmq.MAIN_CLASS in cmd]
    assert len(perf_test) == 1
    assert all(cluster.user.password not in " ".join(cmd) for cmd in commands)
    assert cluster.user.password not in repr(run)
