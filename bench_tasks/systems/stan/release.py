"""nats-streaming-server releases: every 0.x version the Go module proxy lists, built with the machine's Go on first
use into `<cache>/stan/<version>/` (`brokers/gobuild.py`: a temporary GOBIN renamed into place, a lock per version,
a deadline, provenance in build.json).

A build that failed is remembered beside the cache entry (`gobuild.failure`) with the Go that failed it, so the
release list marks that release as one that cannot be assembled, naming why, until another Go is installed. Every
use runs `nats-streaming-server --version` first and refuses a binary that reports another version.
`python -m bench_tasks.systems.stan.release [VERSION] [--timeout S]` builds one, `latest` by default (the Makefile
builds it at set-up).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from ...brokers import gobuild
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release, is_version, resolve

SYSTEM = "stan"  # the system's name (`System.name`), which keys its cached release list

MODULE = "github.com/nats-io/nats-streaming-server"
BINARY = "nats-streaming-server"
SOURCE = "Go module proxy (built with go install)"
BUILD_TIMEOUT_S = 900.0  # a cold build took 67 s on 2 busy cores; a slower host builds ahead with --timeout
_REPORTED = re.compile(r"nats-streaming-server version ([^\s,]+)(?:, nats-server: (\S+))?")
_AHEAD = "python -m bench_tasks.systems.stan.release VERSION --timeout SECONDS"


def list_releases() -> list[Release]:
    """Every 0.x release the module proxy lists; one whose build failed here with this Go says so."""
    versions = [v for v in gobuild.proxy_versions(MODULE) if is_version(v) and v.startswith("0.")]
    return [Release(v, SOURCE, gobuild.failure(release_dir(v))) for v in versions]


def release_dir(version: str) -> Path:
    return cache_dir() / "stan" / version


def server_binary(version: str, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Path to a verified nats-streaming-server of `version`, built into the cache first if needed."""
    if not is_version(version):
        raise BrokerError(f"{version!r} is not a nats-streaming-server release (like 0.25.6)")
    target = release_dir(version) / BINARY
    with gobuild.locked(target.parent):
        if not target.exists():
            build(version, target, timeout_s)
    reported_version(target, version)
    return target


def build(version: str, target: Path, timeout_s: float) -> float:
    """`go install` the release into `target`; returns the seconds it took (also written to build.json). A failed
    build is remembered (`gobuild.failure`) so the release list can say why this release cannot be assembled."""
    print(f"building nats-streaming-server {version} (go install {MODULE}@v{version})", file=sys.stderr)
    seconds = gobuild.build(MODULE, version, target, timeout_s, _AHEAD)
    print(f"built nats-streaming-server {version} in {seconds:.1f} s: {target}", file=sys.stderr)
    return seconds


def reported_version(binary: Path, expected: str | None = None) -> dict[str, str]:
    """What `--version` says (the server's and its embedded nats-server's); refuses an unexpected version."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise BrokerError(f"{binary} cannot run: {exc}") from None
    found = _REPORTED.search(done.stdout + done.stderr)
    if found is None or (expected is not None and found.group(1) != expected):
        said = (done.stdout + done.stderr).strip()[:200]
        raise BrokerError(f"{binary} reports {said!r}, expected nats-streaming-server version {expected}")
    return {"version": found.group(1), "nats_server": found.group(2) or "unknown"}


def main(argv: list[str]) -> int:
    """Build (or verify) one release, the newest that can be assembled by default; prints where it is."""
    parser = argparse.ArgumentParser(prog="python -m bench_tasks.systems.stan.release", description=main.__doc__)
    parser.add_argument("version", nargs="?", default="latest", help="latest, a line (0.25.x) or a release")
    parser.add_argument("--timeout", type=float, default=BUILD_TIMEOUT_S, help="seconds the build may take")
    args = parser.parse_args(argv)
    try:
        print(server_binary(resolve(SYSTEM, list_releases, args.version), args.timeout))
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
