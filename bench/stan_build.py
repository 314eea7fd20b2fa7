"""How long does building nats-streaming-server take? (issue 23: the server is built from the Go module proxy at
set-up time, so a fresh clone pays this once per version)

Builds one release through the harness's own path (`STAN.fetch_release`: `go install` into the cache, then the
binary's `--version` checked) into a throw-away cache (`SIXNINES_CACHE`), twice:
- cold: empty Go module and build caches (every module downloaded from the proxy, everything compiled), as on a
  fresh CI machine;
- warm: the machine's own Go caches (what a second version or a rebuild costs here).
Writes bench/results/stan_build.json with the host's load (`uptime`) beside each figure; `seconds` is the whole
fetch, the build and the check after it (schema 1 timed `go install` alone; the check adds a few milliseconds).

    .venv/bin/python bench/stan_build.py [VERSION] [--skip-cold]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_tasks import go_binary, go_version
from bench_tasks.systems.stan import STAN, reported_version

RESULTS = Path(__file__).parent / "results" / "stan_build.json"
SCHEMA_VERSION = 2  # 1: seconds of `go install` alone; 2: seconds of the whole fetch (build, then the check)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed_build(version: str, go_env: dict[str, str]) -> dict[str, Any]:
    """One fetch into a fresh cache with `go_env` over the environment; the binary is checked, then dropped."""
    before = uptime()
    with tempfile.TemporaryDirectory() as cache:
        env = {"SIXNINES_CACHE": cache, **go_env}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            began = time.monotonic()
            binary = STAN.fetch_release(version)
            seconds = time.monotonic() - began
            reported = reported_version(binary, version)
            size = binary.stat().st_size
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return {"seconds": round(seconds, 1), "reported": reported, "binary_bytes": size, "uptime_before": before}


def cold_build(version: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as caches:
        env = {"GOMODCACHE": f"{caches}/mod", "GOCACHE": f"{caches}/build"}
        try:
            return timed_build(version, env)
        finally:  # the module cache is read-only; go removes it
            subprocess.run(["go", "clean", "-modcache"], env={**os.environ, **env}, capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", default="latest")
    parser.add_argument("--skip-cold", action="store_true", help="only the build with the machine's Go caches")
    args = parser.parse_args()
    go = go_binary("the build benchmark")
    version = STAN.resolve_version(args.version)
    result: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "version": version, "go": go_version(go)}
    if not args.skip_cold:
        result["cold"] = cold_build(version)
    result["warm"] = timed_build(version, {})
    result["uptime_after"] = uptime()
    result["host"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
