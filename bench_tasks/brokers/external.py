"""External brokers: a cell that runs against brokers it did not start (`brokers: external`).

Provisioning only creates the cell's routes (topics, streams: whatever the system's driver prepares), under names
unique to the run and the cell, so two runs (or two sweeps) measuring on one cluster at once never share a route
or consumer group; tearing down deletes them — also after a failed cell, and when creating them failed half-way.
No process is started, signalled or stopped: faults (stall, kill) are refused. The context records what the
brokers say about themselves (asked by the system), how they were reached (connection id, address, security
protocol, user name) and the route names — never a secret.

The connection is resolved by each process that needs it (`connections.get_connection`): provision and teardown
in their Airflow tasks, the detached generator from the `AIRFLOW_CONN_<ID>` variable its task hands it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import BrokerError
from ..load.drivers import driver_for, routes
from ..load.loop import run_precise
from ..load.routes import Target
from ..secrecy import remember_settings, without_userinfo
from ..spec.kept import cell_from, cell_record
from ..spec.matrix_model import Cell
from ..systems import system_of
from .connections import ClientAccess, get_connection
from .handles import STATE_SCHEMA
from .leaders import LeaderWatch

_NAME_TAG_LEN = 8


def route_names(cell_id: str, run_id: str) -> str:
    """The token an external cell's routes are named from: the cell id and a short hash of the run id (topic,
    subject and stream names accept it; consumer groups named after a topic are unique too)."""
    return f"{cell_id}-{hashlib.sha256(run_id.encode()).hexdigest()[:_NAME_TAG_LEN]}"


def refuse_faults(cell: Cell, faults: Sequence[Any]) -> None:
    """Faults signal broker processes; an external cluster's processes are not the harness's to signal."""
    if faults and cell.spec.brokers == "external":
        raise BrokerError(
            f"cell {cell.id}: faults (stall, kill) need provisioned brokers; this cell uses external brokers "
            f"(connection {cell.spec.connection!r}), whose processes the harness does not own"
        )


class ExternalBrokers:
    """The broker-control protocol over brokers the cell does not own (see the module docstring)."""

    def __init__(self, cell: Cell, names: str, workdir: Path, access: ClientAccess | None = None):
        if cell.spec.brokers != "external" or cell.spec.connection is None:
            raise BrokerError(f"cell {cell.id} does not use external brokers")
        self.cell = cell
        self.system = system_of(cell.spec)
        self.workdir = workdir
        self.names = names
        self._access = access
        self._leaders: LeaderWatch | None = None
        self.created: list[str] = []
        self.reported: dict[str, Any] = {}
        self._context: dict[str, Any] | None = None  # as recorded at provision, when attached from a state

    @classmethod
    def for_run(cls, cell: Cell, run_id: str, workdir: Path) -> ExternalBrokers:
        return cls(cell, route_names(cell.instance, run_id), workdir)  # each repeat its own routes

    @classmethod
    def attached(cls, state: Mapping[str, Any]) -> ExternalBrokers:
        """The brokers of `state()`; the connection is resolved again when first needed."""
        brokers = cls(cell_from(state), state["names"], Path(state["workdir"]))
        brokers.created = list(state["context"].get("routes", []))
        brokers._context = dict(state["context"])
        return brokers

    # -- the connection, resolved on first use (teardown may run in another process than provision) --------
    @property
    def access(self) -> ClientAccess:
        if self._access is None:
            self._access = self.system.client_access(get_connection(self.cell.spec.connection), self.cell.spec)
            remember_settings(self._access.client)  # the connection's password is in no record either
        return self._access

    @property
    def address(self) -> str:
        return self.access.address

    def target(self) -> Target:
        return Target(self.address, dict(self.access.client), self.names, prepared=True)

    # -- provision and teardown ------------------------------------------------------------------------------
    def start(self) -> ExternalBrokers:
        """Ask the brokers what they are, then create the cell's routes (left-overs of an earlier attempt of the
        same run and cell are deleted first); whatever was created is deleted again if a later one fails."""
        self.reported = self.system.ask_version(self.address, self.access.client, self.cell.spec)
        self.delete_routes()
        try:
            run_precise(self._create())
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete_routes()
            raise
        self.created = self.system.route_names(self.cell.spec, self.names)
        return self

    async def _create(self) -> None:
        for route, spec in routes(self.cell.spec).items():
            driver = driver_for(self.address, spec, self.names, route, self.access.client)
            try:
                await driver.prepare()
            finally:
                await driver.close()

    def delete_routes(self) -> list[str]:
        """Delete every route of this cell that exists; returns the names the brokers confirmed deleted (raises
        RoutesNotDeleted, with those, when they refused one)."""
        return self.system.delete_routes(self.address, self.access.client, self.cell.spec, self.names)

    def stop(self) -> list[int]:
        """Teardown of an external cell: stop watching, delete its routes; the brokers keep running."""
        self.stop_watching()
        self.delete_routes()
        return []

    # -- what the cell records -------------------------------------------------------------------------------
    def context(self) -> dict[str, Any]:
        if self._context is not None:
            return dict(self._context)
        return {
            "brokers": "external",
            **self.reported,
            "access": self.access.described,
            "names": self.names,
            "routes": self.created or self.system.route_names(self.cell.spec, self.names),
            **self.system.external_context(self.cell.spec),
        }

    def state(self) -> dict[str, Any]:
        """What later steps need to find the cell's routes again: no address, no secret (the connection is
        resolved again by whoever attaches)."""
        return {
            "schema": STATE_SCHEMA,
            "kind": "external",
            "system": self.system.name,
            **cell_record(self.cell, self.workdir / "secrets"),
            "names": self.names,
            "address": without_userinfo(self.address),
            "nodes": {},
            "process_name": "",
            "netns": "",
            "logs": [],
            "workdir": str(self.workdir),
            "context": self.context(),
            "leader": None,
        }

    # -- the rest of the protocol ------------------------------------------------------------------------------
    def _refuse(self, what: str) -> None:
        raise BrokerError(f"{what} refused: cell {self.cell.id} uses external brokers ({self.cell.spec.connection})")

    def pause(self) -> None:
        self._refuse("stall (SIGSTOP)")

    def resume(self) -> None:
        """Nothing was paused."""

    def kill(self) -> None:
        self._refuse("kill (SIGKILL)")

    def fault_nodes(self) -> list[int]:
        self._refuse("a fault")
        return []

    def fault_leader(self) -> int:
        self._refuse("a fault")
        return -1

    fault_controller = fault_leader

    def pause_node(self, node: int) -> None:
        self.pause()

    def resume_node(self, node: int) -> None:
        """Nothing was paused."""

    def kill_node(self, node: int) -> None:
        self.kill()

    def restart_node(self, node: int) -> int:
        self._refuse("restart")
        return -1

    def skip_node(self, node: int | None) -> None:
        """Nothing is cut off: faults are refused."""

    def pids(self) -> list[int]:
        return []

    def node_pids(self) -> dict[int, int]:
        return {}

    def logs(self) -> list[Path]:
        return []

    def alive(self) -> dict[int, bool]:
        return {}

    def running(self) -> list[int]:
        return []

    def watch_leaders(self) -> None:
        """Follow the measured route's leaders where the system has them, as for provisioned brokers."""
        ref = self.system.leader_ref(self.cell.spec, self.names)
        poll = ref and self.system.leader_poll(self.address, self.access.client, ref, False, lambda: None)
        if poll:
            self._leaders = LeaderWatch(poll)
            self._leaders.start()

    def await_leaders(self, timeout_s: float) -> bool:
        """Wait until the leader watch has named the measured route's leader (True at once without a watch)."""
        return self._leaders is None or self._leaders.wait_known(timeout_s)

    def stop_watching(self) -> None:
        if self._leaders is not None:
            self._leaders.stop()

    def leader_changes(self) -> list[dict[str, int]]:
        return self._leaders.changes() if self._leaders is not None else []

    def leader_poll_errors(self) -> dict[str, Any]:
        return self._leaders.poll_errors() if self._leaders is not None else {"count": 0, "last": None}
