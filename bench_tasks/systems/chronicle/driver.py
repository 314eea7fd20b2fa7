"""Chronicle's side of the Python driver interface: routes need no preparing (a queue folder is created by the
first JVM worker that opens it), and no Python worker can play a role: a Python driver calling into Java would
measure the bridge, not the queue, so every Chronicle worker is the JVM worker (`System.worker_program`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...errors import SixninesError
from ...load.driver import ClientErrors


class ChronicleDriver:
    acks = True
    message_threads: tuple[str, ...] = ()

    def __init__(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None):
        self.address, self.route = address, route
        self.errors = ClientErrors()

    async def prepare(self) -> None:
        """Nothing to create: the queue's folder is made by the first worker that opens it."""

    async def cleanup(self) -> None:
        """The keeper removes the queue root with the cell."""

    async def close(self) -> None:
        """No connection to close."""

    def _python_worker(self, *_: Any, **__: Any) -> Any:
        raise SixninesError("Chronicle Queue is a Java library: its cells run JVM workers only (docs/workers.md)")

    open_producer = open_consumer = open_responder = send_batch = request = prefill = _python_worker

    def watch_arrivals(self, on_arrival: Callable[[], None]) -> None:
        """Nothing arrives from a network."""

    def backlog(self) -> int | None:
        return None
