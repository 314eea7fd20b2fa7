"""A broker start that fails after its process exists leaves nothing running: real nats-server processes whose
start is made to fail at the step after the process was forked (the monitor's /varz answer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest

from bench_tasks.systems.nats.release import bundled_version
from bench_tasks.systems.nats.server import NatsServer
from bench_tasks.systems.nats.settings import NatsBroker

pytestmark = [pytest.mark.alongside, pytest.mark.usefixtures("no_orphans")]


class VarzFails(NatsServer):
    """A nats-server whose /varz cannot be read once it is healthy (as when the monitor port stops answering)."""

    @staticmethod
    def varz(monitor_url: str) -> dict[str, Any]:
        raise OSError(f"{monitor_url}/varz: connection reset")


def test_a_nats_server_whose_varz_fails_is_stopped(tmp_path: Path) -> None:
    server = VarzFails(bundled_version(), NatsBroker(), tmp_path / "nats")
    with pytest.raises(OSError, match="connection reset"):
        server.start()
    assert server.process is not None, "the process was never started: the test did not reach its failure"
    pid = server.process.pid
    assert not server.process.alive(), f"nats-server {pid} still runs after its start failed"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
