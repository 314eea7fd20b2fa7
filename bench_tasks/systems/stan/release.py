"""nats-streaming-server releases: built from the Go module proxy with the machine's Go, once per version.

`go install github.com/nats-io/nats-streaming-server@vX` runs with GOBIN pointing at a temporary folder beside
`<cache>/stan/<version>/`, and the binary is renamed into place only when the build succeeded, so a half-built
binary is never used; a lock file keeps two processes from building one version at once. GOFLAGS, GOPROXY and
the Go caches are the machine's own. Every use runs `nats-streaming-server --version` first and refuses a binary
that reports another version. `python -m bench_tasks.systems.stan.release [VERSION] [--timeout S]` builds one (the
Makefile builds the newest at set-up).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from ...errors import BrokerError
from ...paths import cache_dir
from .settings import STAN_VERSIONS

MODULE = "github.com/nats-io/nats-streaming-server"
BINARY = "nats-streaming-server"
BUILD_TIMEOUT_S = 900.0  # a cold build took 67 s on 2 busy cores; a slower host builds ahead with --timeout
_REPORTED = re.compile(r"nats-streaming-server version ([^\s,]+)(?:, nats-server: (\S+))?")


def release_dir(version: str) -> Path:
    return cache_dir() / "stan" / version


def server_binary(version: str, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Path to a verified nats-streaming-server of `version`, built into the cache first if needed."""
    if version not in STAN_VERSIONS:
        raise BrokerError(f"unknown nats-streaming-server version {version!r}; known: {', '.join(STAN_VERSIONS)}")
    target = release_dir(version) / BINARY
    with _locked(target.parent):
        if not target.exists():
            build(version, target, timeout_s)
    reported_version(target, version)
    return target


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if this process dies
        yield


def build(version: str, target: Path, timeout_s: float) -> float:
    """`go install` the release into `target`; returns the seconds it took (also written to build.json)."""
    go = go_binary(f"building nats-streaming-server {version}")
    print(
        f"building nats-streaming-server {version} ({go_version(go)}; go install {MODULE}@v{version})", file=sys.stderr
    )
    seconds = go_install(go, f"{MODULE}@v{version}", target, timeout_s)
    _write_provenance(target.parent, version, go, seconds)
    print(f"built nats-streaming-server {version} in {seconds:.1f} s: {target}", file=sys.stderr)
    return seconds


def go_binary(purpose: str) -> str:
    go = shutil.which("go")
    if go is None:
        raise BrokerError(f"{purpose} needs Go on PATH (Debian: apt-get install golang-go)")
    return go


def go_install(go: str, package: str, target: Path, timeout_s: float) -> float:
    """`go install package@version` into a temporary GOBIN beside `target`, then renamed into place (a half-built
    binary is never used); returns the seconds it took."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as gobin:
        _go_install(go, package, gobin, timeout_s)
        os.replace(Path(gobin) / target.name, target)
    return time.monotonic() - started


def _go_install(go: str, package: str, gobin: str, timeout_s: float) -> None:
    """Run `go install` in its own process group, so a timeout ends the compilers it started too."""
    cmd = [go, "install", package]
    what = package.rsplit("/", 1)[-1]
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, "GOBIN": gobin},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise BrokerError(
            f"building {what} took longer than {timeout_s:.0f} s and was stopped "
            f"(GOPROXY={_go_env(go, 'GOPROXY')}; on a slow host build it ahead: "
            f"python -m bench_tasks.systems.stan.release VERSION --timeout SECONDS)"
        ) from None
    if proc.returncode != 0 or not any(Path(gobin).iterdir()):
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise BrokerError(
            f"building {what} failed ({' '.join(cmd)}, exit {proc.returncode}, "
            f"GOPROXY={_go_env(go, 'GOPROXY')}, GOFLAGS={_go_env(go, 'GOFLAGS') or '(none)'}):\n{tail}"
        )


def go_version(go: str) -> str:
    done = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or "go (version unknown)"


def _go_env(go: str, name: str) -> str:
    done = subprocess.run([go, "env", name], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def _write_provenance(folder: Path, version: str, go: str, seconds: float) -> None:
    """What built the binary, kept beside it (the cell's context records what the server reports)."""
    facts = {
        "module": f"{MODULE}@v{version}",
        "go": go_version(go),
        "goproxy": _go_env(go, "GOPROXY"),
        "goflags": _go_env(go, "GOFLAGS"),
        "build_s": round(seconds, 1),
    }
    (folder / "build.json").write_text(json.dumps(facts, indent=2) + "\n")


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
    """Build (or verify) one release, the newest by default; prints where it is."""
    parser = argparse.ArgumentParser(prog="python -m bench_tasks.systems.stan.release", description=main.__doc__)
    parser.add_argument("version", nargs="?", default="latest", help=f"latest (= {STAN_VERSIONS[0]}) or a release")
    parser.add_argument("--timeout", type=float, default=BUILD_TIMEOUT_S, help="seconds the build may take")
    args = parser.parse_args(argv)
    version = STAN_VERSIONS[0] if args.version == "latest" else args.version
    try:
        print(server_binary(version, args.timeout))
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
