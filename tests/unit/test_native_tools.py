"""The native tools' outputs as the RabbitMQ and Redis rows of `bench/native_compare.py` read them, and the
credentials they are given: PerfTest's summary lines, redis-benchmark's CSV row, redis-cli --latency's closing
line; PerfTest's URI carries the cell's login and the default vhost, and reaches it only through its environment."""

from __future__ import annotations

import pytest

from bench.native_rabbitmq import (
    ENV_PREFIX,
    PerfTestError,
    parse_perf_test,
    perf_test_env,
    perf_test_uri,
)
from bench.native_redis import RedisToolError, parse_benchmark_csv, parse_cli_latency, server_of

PERF_TEST_TAIL = """\
id: test-051609-953, time 6.000 s, sent: 1000 msg/s, confirmed: 1000 msg/s, nacked: 0 msg/s, received: 999 msg/s, \
min/median/75th/95th/99th consumer latency: 116/216/269/2563/12903 µs, confirm latency: 82/165/199/1979/13167 µs
test stopped (Reached time limit)
id: test-051609-953, sending rate avg: 1013 msg/s
id: test-051609-953, receiving rate avg: 1013 msg/s
id: test-051609-953, consumer latency min/median/75th/95th/99th 126/234/325/2523/15811 µs
id: test-051609-953, confirm latency min/median/75th/95th/99th 87/176/230/1981/11888 µs
"""


def test_perf_test_summary_is_read_from_its_closing_lines_not_a_per_second_one() -> None:
    found = parse_perf_test(PERF_TEST_TAIL)
    assert found["consumer"] == {"min_ms": 0.126, "p50_ms": 0.234, "p75_ms": 0.325, "p95_ms": 2.523, "p99_ms": 15.811}
    assert (found["confirm"]["p50_ms"], found["confirm"]["p99_ms"]) == (0.176, 11.888)


def test_a_perf_test_run_without_its_summary_is_an_error() -> None:
    with pytest.raises(PerfTestError, match="no consumer and confirm latency summary"):
        parse_perf_test(PERF_TEST_TAIL.splitlines()[0])


def test_perf_test_uri_carries_the_login_and_spells_out_the_default_vhost() -> None:
    client = {"username": "sixnines", "password": "p@ss/word"}
    uri = perf_test_uri("amqp://127.0.0.1:5672/,amqp://127.0.0.1:5673/", client)
    assert uri == "amqp://sixnines:p%40ss%2Fword@127.0.0.1:5672/%2F"
    assert perf_test_uri("amqp://h:1/vh", {}) == "amqp://h:1/vh"


def test_perf_test_sees_the_uri_under_its_prefix_and_none_of_this_process_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RATE", "5")  # PerfTest would read it as --rate without a prefix of its own
    env = perf_test_env("amqp://u:secret@h:1/%2F")
    assert env[f"{ENV_PREFIX}URI"] == "amqp://u:secret@h:1/%2F"
    assert env["RABBITMQ_PERF_TEST_ENV_PREFIX"] == ENV_PREFIX
    assert "RATE" not in env
    assert set(env) - {"PATH", "HOME", "JAVA_HOME", "LANG"} == {"RABBITMQ_PERF_TEST_ENV_PREFIX", f"{ENV_PREFIX}URI"}


def test_redis_benchmark_csv_row() -> None:
    out = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",'
        '"max_latency_ms"\n"XADD sixnines.native-bench","38461.54","0.022","0.016","0.023","0.031","0.047","0.295"\n'
    )
    got = parse_benchmark_csv(out)
    assert got == {
        "requests_per_s": 38461.54,
        "avg_ms": 0.022,
        "min_ms": 0.016,
        "p50_ms": 0.023,
        "p95_ms": 0.031,
        "p99_ms": 0.047,
        "max_ms": 0.295,
    }
    with pytest.raises(RedisToolError, match="0 result rows"):
        parse_benchmark_csv('"test","rps"\n')


def test_redis_cli_latency_line_and_server_address() -> None:
    assert parse_cli_latency("0 3 0.09 288\n") == {"min_ms": 0.0, "max_ms": 3.0, "mean_ms": 0.09, "samples": 288}
    with pytest.raises(RedisToolError):
        parse_cli_latency("min: 0, max: 3")
    assert server_of("redis://127.0.0.1:52829,redis://127.0.0.1:52830") == ["-h", "127.0.0.1", "-p", "52829"]
