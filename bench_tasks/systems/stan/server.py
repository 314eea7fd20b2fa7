"""One nats-streaming-server on a given address: free ports, its own cluster id and store directory, a config
file rendered from the broker settings. Ready only when the server logs that the streaming layer is ready (its
embedded NATS server is up earlier, before the store is recovered). `restart()` starts the same node again on the
same ports and the same store, so a file store's acknowledged messages can be counted after a kill.
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess, stopped_on_failure
from ...errors import BrokerError
from ...secrecy import redacted, write_secret
from ..nats.auth import cell_authorization, client_credentials
from .release import reported_version, server_binary
from .settings import StanBroker

READY_LINE = "Streaming Server is ready"
CONFIG_NAME = "nats-streaming-server.conf"
LOG_NAME = "nats-streaming-server.log"
# NATS's own limit on one message; a PubMsg wraps the payload with ids and the subject, so a 1 MiB message needs
# more. Raised only when a cell's messages need it (and recorded in the config like every other setting).
DEFAULT_MAX_PAYLOAD = 1024 * 1024
ENVELOPE_BYTES = 4096


def render_config(settings: dict[str, Any]) -> str:
    """The config file; values are written as JSON, which the NATS config parser reads (maps included)."""
    return "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())


def max_payload_for(message_size_bytes: int) -> int | None:
    """The `max_payload` a cell's largest message needs, or None when the server's default holds it."""
    needed = message_size_bytes + ENVELOPE_BYTES
    return needed if needed > DEFAULT_MAX_PAYLOAD else None


@dataclass(frozen=True)
class StanEndpoint:
    """How to reach a running server, and what it is (the broker state and the cell's context)."""

    url: str
    monitor_url: str
    pid: int
    version: str
    nats_server: str
    go: str
    cluster_id: str
    store: str
    file_sync: bool | None
    limits: dict[str, Any]
    config: str
    store_dir: str


class StanServer:
    """A nats-streaming-server process for one cell; the same node across `restart()`."""

    def __init__(
        self,
        version: str,
        broker: StanBroker,
        workdir: Path,
        cluster_id: str,
        tie_to_parent: bool = True,
        host: str = "127.0.0.1",
        max_payload: int | None = None,
    ):
        self.version = version
        self.broker = broker
        self.workdir = Path(workdir)
        self.cluster_id = cluster_id
        self.tie_to_parent = tie_to_parent
        self.host = host  # loopback, or its host's address in a network namespace
        self.max_payload = max_payload
        self.ports: tuple[int, int] | None = None  # client, monitor: chosen at the first start, kept on restarts
        self.process: BrokerProcess | None = None
        self.endpoint: StanEndpoint | None = None
        self.authorization = cell_authorization(broker.server)  # every server asks for a password
        client_credentials(self.authorization, required=True)  # a block it cannot log in with: refused now

    @property
    def client(self) -> dict[str, Any]:
        """What the harness's clients log in with (the brokers' client settings: secret)."""
        return client_credentials(self.authorization, required=True)

    @property
    def store_dir(self) -> Path:
        return self.workdir / "store"

    def settings(self, port: int, monitor_port: int) -> dict[str, Any]:
        """The whole config: the embedded NATS server's top level, then the `streaming { }` section."""
        top: dict[str, Any] = {"listen": f"{self.host}:{port}", "http": f"{self.host}:{monitor_port}"}
        if self.max_payload is not None:
            top["max_payload"] = self.max_payload
        top.update(self.broker.server)  # native options pass through untouched
        top["authorization"] = self.authorization  # one user (or token): the streaming layer logs in with it too
        top["streaming"] = self.streaming_section()
        return top

    def streaming_section(self) -> dict[str, Any]:
        b = self.broker
        section: dict[str, Any] = {"cluster_id": self.cluster_id, "store": b.store}
        extra = dict(b.streaming)
        file_options = {**(extra.pop("file", None) or {}), **(extra.pop("file_options", None) or {})}
        if b.store == "file":
            section["dir"] = str(self.store_dir)
            file_options["sync_on_flush"] = bool(b.file_sync)
        if file_options:
            section["file_options"] = file_options
        if b.limits.config():
            section["store_limits"] = b.limits.config()
        section.update(extra)
        return section

    def start(self, timeout_s: float = 30.0) -> StanEndpoint:
        """Start the node (the first time on fresh free ports) and wait until it is ready for clients."""
        timeout_s = with_patience(timeout_s)
        binary = server_binary(self.version)
        reported = reported_version(binary, self.version)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.ports is None:
            self.ports = tuple(free_ports(2, self.host))
        settings = self.settings(*self.ports)
        config = render_config(redacted(settings))  # as recorded
        config_path = write_secret(self.workdir / CONFIG_NAME, render_config(settings))  # it holds the password
        log = self.workdir / LOG_NAME
        offset = log.stat().st_size if log.exists() else 0  # a restart appends: only its own lines count
        self.process = BrokerProcess([str(binary), "-c", str(config_path)], log, self.tie_to_parent)
        with stopped_on_failure(self.stop, f"nats-streaming-server {self.process.pid}"):  # nothing left running
            self._wait_ready(log, offset, timeout_s)
            monitor_url = f"http://{self.host}:{self.ports[1]}"
            self.endpoint = self._endpoint(monitor_url, config, reported["nats_server"])
        return self.endpoint

    def _endpoint(self, monitor_url: str, config: str, nats_server: str) -> StanEndpoint:
        assert self.process is not None and self.ports is not None
        serverz, storez = monitor(monitor_url, "serverz"), monitor(monitor_url, "storez")
        if serverz.get("version") != self.version or serverz.get("cluster_id") != self.cluster_id:
            self.stop()
            raise BrokerError(
                f"nats-streaming-server reports version {serverz.get('version')} cluster {serverz.get('cluster_id')}"
                f", expected {self.version} {self.cluster_id}"
            )
        return StanEndpoint(
            url=f"nats://{self.host}:{self.ports[0]}",
            monitor_url=monitor_url,
            pid=self.process.pid,
            version=serverz["version"],
            nats_server=nats_server,
            go=serverz.get("go", "unknown"),
            cluster_id=self.cluster_id,
            store=str(storez.get("type", self.broker.store)).lower(),
            file_sync=self.broker.file_sync,
            limits=storez.get("limits", {}),
            config=config,
            store_dir=str(self.store_dir) if self.broker.store == "file" else "",
        )

    def _wait_ready(self, log: Path, offset: int, timeout_s: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.process.alive():
                raise BrokerError(
                    f"nats-streaming-server {self.version} exited during start{self._passed_through()}:\n"
                    f"{self.process.log_tail()}"
                )
            with open(log, "rb") as f:
                f.seek(offset)
                if READY_LINE.encode() in f.read():
                    return
            time.sleep(0.05)
        self.stop()
        raise BrokerError(f"nats-streaming-server not ready after {timeout_s:.0f} s:\n{self.process.log_tail()}")

    def _passed_through(self) -> str:
        """The matrix's native settings, named as a matrix writes them (the server's own message may not say which
        key it refused)."""
        given = [f"server.{k}={v!r}" for k, v in redacted(self.broker.server).items()]
        given += [f"streaming.{k}={v!r}" for k, v in redacted(self.broker.streaming).items()]
        return f" (settings passed through: {', '.join(given)})" if given else ""

    def restart(self, timeout_s: float = 30.0) -> StanEndpoint:
        """Start the same node again on its ports and store (after a kill or a stop)."""
        if self.ports is None:
            raise BrokerError("nats-streaming-server was never started; nothing to restart")
        if self.process is not None and self.process.alive():
            raise BrokerError(f"nats-streaming-server (pid {self.process.pid}) still runs; kill or stop it first")
        self.stop()  # closes the log handle of the dead process
        return self.start(timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

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
            raise BrokerError("nats-streaming-server is not running")
        return self.process

    def __enter__(self) -> StanServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> dict[str, Any]:
        assert self.endpoint is not None
        return asdict(self.endpoint)


def monitor(monitor_url: str, page: str) -> dict[str, Any]:
    """One of the server's `/streaming/<page>` monitoring pages (serverz, storez, channelsz, clientsz)."""
    with urllib.request.urlopen(f"{monitor_url}/streaming/{page}", timeout=5) as resp:
        return json.loads(resp.read())
