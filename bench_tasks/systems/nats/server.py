"""One nats-server on a given address (127.0.0.1, or a network-namespace host's): free ports, a fresh store
directory and a config rendered from the broker settings on every start.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess, stopped_on_failure
from ...errors import BrokerError
from ...secrecy import redacted, write_secret
from .release import server_binary
from .settings import NatsBroker


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
        timeout_s = with_patience(timeout_s)
        binary = server_binary(self.version)
        self.workdir.mkdir(parents=True, exist_ok=True)
        port, monitor_port = free_ports(2, self.host)
        settings = self.settings(port, monitor_port)
        config = render_config(redacted(settings))  # recorded: passthrough secrets are not
        config_path = self.workdir / "nats-server.conf"
        write_secret(config_path, render_config(settings))  # passthrough settings may hold secrets
        self.process = BrokerProcess(
            [str(binary), "-c", str(config_path)], self.workdir / "nats-server.log", self.tie_to_parent
        )
        with stopped_on_failure(self.stop, f"nats-server {self.process.pid}"):
            monitor_url = f"http://{self.host}:{monitor_port}"
            self._wait_healthy(monitor_url, timeout_s)
            reported = self.varz(monitor_url).get("version", "?")
            if reported != self.version:
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
        """Until `/healthz` answers 200; a release without it (before 2.7) answers 404 there, and is ready once its
        monitor answers `/varz` (it serves clients before the monitor starts)."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        page = "/healthz"
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise BrokerError(f"nats-server exited during start:\n{self.process.log_tail()}")
            try:
                with urllib.request.urlopen(f"{monitor_url}{page}", timeout=1) as resp:
                    if resp.status == 200:
                        return
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    page = "/varz"
            except OSError:
                pass
            time.sleep(0.05)
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
