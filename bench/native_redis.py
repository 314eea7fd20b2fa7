"""Redis's own tools beside sixnines (`bench/native_compare.py` rows `redis_benchmark_xadd`, `redis_cli_latency`).

Both rows run on one fresh Redis (streams mode) and alternate the native tool with a sixnines `publish` cell: XADD
of 1 KiB at 1000/s with `MAXLEN ~ 100000`, publish from sent being the time from handing the XADD to the client to
its reply (the entry id), one round trip to the server.

- `redis-benchmark` sends the same XADD from one connection, closed loop (the next request as soon as the reply
  is in), and prints percentiles of its per-request latency from an HdrHistogram: the same quantity, with no
  pause between requests, so neither process sleeps and wakes between them as both do at 1000/s.
- `redis-cli --latency` PINGs every 10 ms and reads the clock in whole milliseconds (`mstime()`): each sample is
  0 or 1 ms, so only its average means something, and for round trips under 1 ms it is the mean round trip
  (a sample reads 1 ms when a millisecond tick falls inside it, which happens in proportion to its length). A
  PING carries nothing and does nothing, so it is the floor of any round trip to this server; the row compares
  it with sixnines' mean publish from sent, which also carries 1 KiB and appends it to a stream.

The server asks for the cell's password (`requirepass`). redis-cli reads it from REDISCLI_AUTH in its environment.
redis-benchmark takes it only on its command line (`-a`), where any process on the host can read it, so it logs
in instead as a user made for the run (`ACL SETUSER`, through redis-cli): no password, allowed XADD on the
benchmark's key and nothing else, deleted after the run. No password is printed or written to the results.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from bench.trials import ratio, summarize_trials
from bench_tasks import Cell, SixninesError, parse_matrix, select_cells

if TYPE_CHECKING:
    from bench.native_compare import Rows

RATE_PER_S, SIZE_BYTES, MAXLEN = 1000, 1024, 100_000
BENCH_USER = "sixnines-native-bench"
BENCH_KEY = "sixnines.native-bench"
PING_GAP_S = 0.010  # redis-cli --latency's pause between PINGs (LATENCY_SAMPLE_RATE)
_TIMEOUT_S = 300.0
NOTES = {
    "redis_benchmark_xadd": "redis-benchmark times each request from its write to its reply, one connection, "
    "closed loop (no pause between requests), into an HdrHistogram; sixnines' publish from sent is the same "
    "round trip for an XADD paced at 1000/s, stamped around the client's calls, between processes that sleep "
    "between messages. Its from-intended figures (also recorded) add its schedule lag.",
    "redis_cli_latency": "redis-cli --latency PINGs every 10 ms and reads a whole-millisecond clock, so each "
    "sample is 0 or 1 ms and only the mean is a measurement (for sub-millisecond round trips, the mean round "
    "trip); a PING is the floor of any round trip to this server. sixnines' figure is its mean publish from "
    "sent for a 1 KiB XADD at 1000/s, which does more than a PING: the ratio is an upper bound on what the "
    "harness adds.",
}


class RedisToolError(SixninesError):
    """redis-benchmark or redis-cli failed or printed nothing readable."""


def shape_cell(measure_s: float, lag_limit_ms: float, library: str = "redis-py") -> Cell:
    """The sixnines side: a streams `publish` cell, XADD of 1 KiB at 1000/s; on redis-py in the Python workers, or
    (`library` java) on Lettuce in the JVM worker."""
    system = {"system": "redis", "versions": ["latest"], "broker": {"mode": "streams"}}
    raw = {
        "name": "native_compare",
        "systems": [{**system, "client": {"library": library}}],
        "workload": {
            "message_size_bytes": SIZE_BYTES,
            "rate_per_s": RATE_PER_S,
            "warmup_s": 2,
            "measure_s": measure_s,
            "cooldown_s": 1,
            "max_schedule_lag_ms": lag_limit_ms,
        },
        "measurements": ["publish"],
    }
    (cell,) = select_cells(parse_matrix(raw, "native_compare"))
    return cell


def server_of(address: str) -> list[str]:
    """redis-cli/redis-benchmark's -h and -p for the first server of a redis:// address."""
    parts = urlsplit(address.split(",")[0])
    return ["-h", parts.hostname or "127.0.0.1", "-p", str(parts.port or 6379)]


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False
    )
    if done.returncode != 0:
        raise RedisToolError(f"{cmd[0]} exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout


def _cli(address: str, client: dict[str, Any], *args: str) -> str:
    """redis-cli against the server, the cell's password in its environment only."""
    env = dict(os.environ)
    if client.get("password"):
        env["REDISCLI_AUTH"] = str(client["password"])
    return _run(["redis-cli", *server_of(address), *args], env)


def parse_benchmark_csv(output: str) -> dict[str, float]:
    """redis-benchmark --csv's one row: requests/s and latency figures (ms)."""
    rows = list(csv.DictReader(io.StringIO(output)))
    if len(rows) != 1:
        raise RedisToolError(f"redis-benchmark printed {len(rows)} result rows: {output[-300:]!r}")
    (row,) = rows
    keys = ("avg", "min", "p50", "p95", "p99", "max")
    return {"requests_per_s": float(row["rps"])} | {f"{k}_ms": float(row[f"{k}_latency_ms"]) for k in keys}


def parse_cli_latency(output: str) -> dict[str, float]:
    """redis-cli --latency's closing line when not on a terminal: `min max avg samples` (ms, ms, ms, count)."""
    try:
        low, high, mean, samples = output.split()
        return {"min_ms": float(low), "max_ms": float(high), "mean_ms": float(mean), "samples": int(samples)}
    except ValueError:
        raise RedisToolError(f"redis-cli --latency printed {output[-200:]!r}") from None


def redis_benchmark_xadd(address: str, client: dict[str, Any], requests: int) -> dict[str, Any]:
    """One redis-benchmark run of the XADD, logged in as a password-less user allowed only that."""
    acl = ["reset", "on", "nopass", f"~{BENCH_KEY}", "+xadd"]
    _cli(address, client, "ACL", "SETUSER", BENCH_USER, *acl)
    command = ["XADD", BENCH_KEY, "MAXLEN", "~", str(MAXLEN), "*", "payload", "x" * SIZE_BYTES]
    login = ["--user", BENCH_USER, "-a", "unused"]  # a nopass user takes any password
    try:
        out = _run(["redis-benchmark", *server_of(address), *login, "-c", "1", "-n", str(requests), "--csv", *command])
    finally:
        _cli(address, client, "ACL", "DELUSER", BENCH_USER)
        _cli(address, client, "DEL", BENCH_KEY)
    shown = " ".join(["redis-benchmark", "-c", "1", "-n", str(requests), "--csv", *command[:-1], f"<{SIZE_BYTES} B>"])
    return {"tool": shown, **parse_benchmark_csv(out)}


def redis_cli_latency(address: str, client: dict[str, Any], seconds: float) -> dict[str, Any]:
    out = _cli(address, client, "--latency", "-i", f"{seconds:g}")
    return {"tool": f"redis-cli --latency -i {seconds:g}", **parse_cli_latency(out)}


def benchmark_row(rows: Rows, library: str = "redis-py") -> dict[str, Any]:
    """redis-benchmark's XADD percentiles beside sixnines' publish from sent (on `library`), alternating on one
    server."""
    from bench import native_compare as nc  # at call time: native_compare imports this module

    cell = shape_cell(rows.measure_s, nc.LAG_LIMIT_MS, library)
    requests = int(RATE_PER_S * rows.measure_s)
    with nc.fresh_brokers(cell, rows.workdir) as brokers:
        target = brokers.target()

        def native() -> dict[str, Any]:
            run = redis_benchmark_xadd(target.address, dict(target.client), requests)
            rows.console.print(f"  redis-benchmark XADD: p50 {run['p50_ms']:.3f} ms p99 {run['p99_ms']:.3f} ms")
            return run

        trials = rows._alternate(native, lambda: _ours(nc, rows, cell, brokers), "publish")
    return {
        "shape": "Redis streams, XADD 1 KiB (MAXLEN ~ 100000), one connection; sixnines at 1000/s",
        "compares": f"redis-benchmark per-request latency vs sixnines publish from sent (client: {library})",
        **nc._latency_summary(trials),
        "notes": NOTES["redis_benchmark_xadd"],
    }


def cli_latency_row(rows: Rows) -> dict[str, Any]:
    """redis-cli --latency's mean PING round trip beside sixnines' mean publish from sent, alternating."""
    from bench import native_compare as nc

    cell = shape_cell(rows.measure_s, nc.LAG_LIMIT_MS)
    with nc.fresh_brokers(cell, rows.workdir) as brokers:
        target = brokers.target()
        trials = rows._alternate(
            lambda: redis_cli_latency(target.address, dict(target.client), rows.measure_s),
            lambda: _ours(nc, rows, cell, brokers),
            "publish",
            _mean_ratio,
        )
    summary = summarize_trials(trials, ("mean",), nc.LATENCY_TARGET)
    return {
        "shape": "Redis streams; redis-cli PING every 10 ms; sixnines XADD 1 KiB at 1000/s",
        "compares": "redis-cli --latency mean PING round trip vs sixnines mean publish from sent",
        "trials": trials,
        "ratio": {"mean": summary["mean"]["median"]},
        "ratio_summary": summary,
        "ratio_means": "the median over trials of (sixnines mean publish from sent / redis-cli mean PING)",
        "notes": NOTES["redis_cli_latency"],
    }


def _ours(nc: Any, rows: Rows, cell: Cell, brokers: Any) -> dict[str, Any]:
    return nc.figures(nc.sixnines(cell, brokers, rows.lake, rows.console), "publish")


def _mean_ratio(native: dict[str, Any], mine: dict[str, Any]) -> dict[str, Any]:
    """On the mean: the only figure redis-cli --latency measures below a millisecond."""
    return {"mean": ratio(mine.get("publish_from_sent_ms", {}).get("mean"), native["mean_ms"])}
