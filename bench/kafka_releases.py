"""How long does fetching a Kafka release take? (issue 43: any release on Maven Central is assembled on demand, so a
matrix naming a release the host has not run yet pays this once)

Fetches each release through the harness's own path (`KAFKA.fetch_release`: `mvn dependency:copy-dependencies`
into `<cache>/kafka/<version>/libs`, a sha256 manifest, then the manifest checked) three ways, each in a
throw-away cache:
- cold: an empty per-version cache folder, Maven's local repository as the host has it (what a release costs on a
  host that fetched others: the jars they share are not downloaded again);
- cold, empty Maven repository: Maven's local repository empty too (every jar, and Maven's own plugins, downloaded
  from Central), as on a fresh machine;
- warm: the release already in the cache (every use checks each jar against the manifest's sha256).
One release of each kind: a KRaft 4.x, a KRaft 3.6.x and a ZooKeeper-era one. The release list is timed too
(`KAFKA.list_releases`, what `sixnines brokers fetch kafka --list` asks): cold (no release checked yet: a pom
GET and a jar HEAD for every Kafka module of every release) and warm (complete releases remembered). Writes
bench/results/kafka_releases.json with the host's load (`os.getloadavg()`) beside each figure.

    .venv/bin/python bench/kafka_releases.py [VERSION ...] [--repeats N] [--skip-empty-maven]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_tasks.systems.kafka import KAFKA, mode_of

RESULTS = Path(__file__).parent / "results" / "kafka_releases.json"
RELEASES = ("4.3.2", "3.6.2", "2.8.2")  # KRaft 4.x, KRaft 3.6.x, ZooKeeper era
# 1: listing {releases, cold, warm}, releases [{version, mode, jars, mb, runs: {kind: [{seconds, load_1m_5m_15m}]}}]
SCHEMA_VERSION = 1


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(fetch: Callable[[], Path]) -> tuple[dict[str, Any], Path]:
    """One fetch, with the load before it."""
    before = load()
    began = time.monotonic()
    libs = fetch()
    return {"seconds": round(time.monotonic() - began, 2), "load_1m_5m_15m": before}, libs


def in_cache(cache: Path, maven_repo: Path | None = None) -> dict[str, str | None]:
    """The environment one measurement runs in: a cache of its own, and Maven's local repository moved to an
    empty folder when `maven_repo` is given (Maven reads `maven.repo.local` from MAVEN_OPTS' system properties)."""
    env = {"SIXNINES_CACHE": str(cache)}
    if maven_repo is not None:
        env["MAVEN_OPTS"] = f"{os.environ.get('MAVEN_OPTS', '')} -Dmaven.repo.local={maven_repo}".strip()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    return saved


def restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def measure(version: str, empty_maven: bool) -> dict[str, Any]:
    """Cold (and cold with an empty Maven repository), then warm, each in a fresh cache folder."""
    runs: dict[str, Any] = {}
    kinds = ["cold", *(["cold_empty_maven"] if empty_maven else [])]
    libs: Path | None = None
    for kind in kinds:
        with tempfile.TemporaryDirectory(prefix="sixnines-kafka-fetch-") as tmp:
            saved = in_cache(Path(tmp) / "cache", Path(tmp) / "m2" if kind == "cold_empty_maven" else None)
            try:
                runs[kind], libs = timed(lambda: KAFKA.fetch_release(version))
                if kind == "cold":
                    runs["warm"], _ = timed(lambda: KAFKA.fetch_release(version))
                    jars = sorted(libs.glob("*.jar"))
                    runs["jars"], runs["mb"] = len(jars), round(sum(j.stat().st_size for j in jars) / 1e6, 1)
            finally:
                restore(saved)
                shutil.rmtree(tmp, ignore_errors=True)
    return runs


def measure_listing() -> dict[str, Any]:
    """The release list from Central in a fresh cache (every release's modules checked), then again."""
    with tempfile.TemporaryDirectory(prefix="sixnines-kafka-list-") as tmp:
        saved = in_cache(Path(tmp))
        try:
            began, before = time.monotonic(), load()
            listed = KAFKA.list_releases()
            cold = {"seconds": round(time.monotonic() - began, 2), "load_1m_5m_15m": before}
            began, before = time.monotonic(), load()
            KAFKA.list_releases()
            warm = {"seconds": round(time.monotonic() - began, 2), "load_1m_5m_15m": before}
        finally:
            restore(saved)
    return {
        "releases": len(listed),
        "cannot_be_assembled": [r.version for r in listed if r.missing],
        "cold": cold,
        "warm": warm,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", default=list(RELEASES))
    parser.add_argument("--repeats", type=int, default=2, help="measurements of each release (default 2)")
    parser.add_argument("--skip-empty-maven", action="store_true", help="no fetch with an empty Maven repository")
    args = parser.parse_args()
    listing = measure_listing()
    print(json.dumps(listing), flush=True)
    releases = []
    for version in args.versions:
        repeats = [measure(version, not args.skip_empty_maven) for _ in range(args.repeats)]
        kinds = [k for k in repeats[0] if k not in ("jars", "mb")]
        releases.append(
            {
                "version": version,
                "mode": mode_of(version),
                "jars": repeats[0]["jars"],
                "mb": repeats[0]["mb"],
                "runs": {kind: [r[kind] for r in repeats] for kind in kinds},
            }
        )
        print(json.dumps(releases[-1]), flush=True)
    result = {
        "schema_version": SCHEMA_VERSION,
        "command": "bench/kafka_releases.py " + " ".join(args.versions),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_after": load()},
        "listing": listing,
        "releases": releases,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
