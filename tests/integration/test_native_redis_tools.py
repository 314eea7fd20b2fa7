"""redis-benchmark and redis-cli --latency as `bench/native_compare.py`'s Redis rows run them, against a real
server that asks for the cell's password: both measure, the password is never on a command line (redis-cli gets
it from its environment, redis-benchmark logs in as a password-less user allowed one command on one key), and
that user and its key are gone afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis

from bench import native_redis
from bench_tasks.systems.redis.nodes import RedisServers
from bench_tasks.systems.redis.settings import RedisBroker

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]


def test_the_tools_measure_without_the_password_on_any_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(cmd: list[str], *args: Any, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        commands.append(list(cmd))
        return real_run(cmd, *args, **kwargs)

    monkeypatch.setattr(native_redis.subprocess, "run", recording_run)
    with RedisServers("latest", RedisBroker(mode="streams"), tmp_path) as servers:
        address, client = servers.url(1), {"password": servers.password}
        bench = native_redis.redis_benchmark_xadd(address, client, 2000)
        ping = native_redis.redis_cli_latency(address, client, 1)
        control = redis.Redis.from_url(servers.login_url(1), protocol=2)
        users, key_left = control.acl_users(), control.exists(native_redis.BENCH_KEY)
    assert 0 < bench["p50_ms"] <= bench["p99_ms"] <= bench["max_ms"] and bench["requests_per_s"] > 0
    assert ping["samples"] > 10 and 0 <= ping["min_ms"] <= ping["mean_ms"] <= ping["max_ms"]
    assert native_redis.BENCH_USER not in users and key_left == 0
    assert commands and all(servers.password not in " ".join(cmd) for cmd in commands)
    assert servers.password not in bench["tool"] + ping["tool"]
