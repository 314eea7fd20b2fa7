"""External brokers: a cell that runs against brokers it did not start (`brokers: external`).

Provisioning only creates the cell's topics (Kafka) or streams (JetStream), under names unique to the run and the
cell, so two runs (or two sweeps) measuring on one cluster at once never share a topic or consumer group; tearing
down deletes them — also after a failed cell, and when creating them failed half-way. No process is started,
signalled or stopped: faults (stall, kill) are refused. The context records what the brokers say about
themselves (NATS: the server's INFO; Kafka: its features, see the system's version probe), how they were
reached (connection id, address, security protocol, user name) and the route names — never a secret.

The connection is resolved by each process that needs it (`connections.get_connection`): provision and teardown
in their Airflow tasks, the detached generator from the `AIRFLOW_CONN_<ID>` variable its task hands it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .connections import ClientAccess, get_connection, kafka_access, nats_access
from .drivers import Target, driver_for, final_route, routes
from .errors import BrokerError
from .loop import run_precise
from .spec.matrix import Cell
from .systems.nats.settings import NatsCell

_NAME_TAG_LEN = 8


def route_names(cell_id: str, run_id: str) -> str:
    """The token an external cell's routes are named from: the cell id and a short hash of the run id (topic,
    subject and stream names accept it; Kafka's consumer group is the topic name, so it is unique too)."""
    return f"{cell_id}-{hashlib.sha256(run_id.encode()).hexdigest()[:_NAME_TAG_LEN]}"


def refuse_faults(cell: Cell, faults: Sequence[Any]) -> None:
    """Faults signal broker processes; an external cluster's processes are not the harness's to signal."""
    if faults and cell.spec.brokers == "external":
        raise BrokerError(
            f"cell {cell.id}: faults (stall, kill) need provisioned brokers; this cell uses external brokers "
            f"(connection {cell.spec.connection!r}), whose processes the harness does not own"
        )


def access_for(spec: Any) -> ClientAccess:
    """Resolve the cell's connection now and turn it into client settings (the cell's security wins)."""
    conn = get_connection(spec.connection)
    if spec.system == "kafka":
        return kafka_access(conn, spec.client.security, spec.client.sasl_mechanism)
    return nats_access(conn)


class ExternalBrokers:
    """The Provisioned interface over brokers the cell does not own (see the module docstring)."""

    def __init__(self, cell: Cell, run_id: str, workdir: Path, access: ClientAccess | None = None):
        if cell.spec.brokers != "external" or cell.spec.connection is None:
            raise BrokerError(f"cell {cell.id} does not use external brokers")
        self.cell = cell
        self.workdir = workdir
        self.names = route_names(cell.instance, run_id)  # each repeat its own routes
        self._access = access
        self._leaders: Any = None
        self.created: list[str] = []
        self.reported: dict[str, Any] = {}
        self._context: dict[str, Any] | None = None  # as recorded at provision, when attached from a state file

    # -- the connection, resolved on first use (teardown may run in another process than provision) --------
    @property
    def access(self) -> ClientAccess:
        if self._access is None:
            self._access = access_for(self.cell.spec)
        return self._access

    @property
    def address(self) -> str:
        return self.access.address

    @property
    def client(self) -> dict[str, Any]:
        return dict(self.access.client)

    def target(self) -> Target:
        return Target(self.address, self.client, self.names, prepared=True)

    def _drivers(self) -> dict[str, Any]:
        return {
            route: driver_for(self.address, spec, self.names, route, self.client)
            for route, spec in routes(self.cell.spec).items()
        }

    def route_names(self) -> list[str]:
        """Every topic (Kafka) or stream (JetStream) this cell uses; core NATS subjects need no creating."""
        drivers = self._drivers().values()
        if self.cell.spec.system == "kafka":
            return [d.topic for d in drivers]
        return [d.stream for d in drivers if d.jetstream]

    # -- provision and teardown ------------------------------------------------------------------------------
    def start(self) -> ExternalBrokers:
        """Ask the brokers what they are, then create the cell's routes (left-overs of an earlier attempt of the
        same run and cell are deleted first); whatever was created is deleted again if a later one fails."""
        self.reported = self._ask_version()
        self.delete_routes()
        try:
            run_precise(self._create())
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete_routes()
            raise
        return self

    async def _create(self) -> None:
        for driver in self._drivers().values():
            try:
                await driver.prepare()
            finally:
                await driver.close()
            if self.cell.spec.system == "kafka" or driver.jetstream:
                self.created.append(driver.topic if self.cell.spec.system == "kafka" else driver.stream)

    def delete_routes(self) -> list[str]:
        """Delete every route of this cell that exists; returns the names that were deleted."""
        if self.cell.spec.system == "kafka":
            return self._delete_topics()
        return run_precise(self._delete_streams())

    def _delete_topics(self) -> list[str]:
        from .systems.kafka.admin import admin_client, delete_topic

        names = self.route_names()
        try:
            existing = set(admin_client(self.address, self.client).list_topics(timeout=15).topics)
        except Exception as exc:
            raise BrokerError(f"cannot list topics on {self.address}: {exc}") from exc
        gone = [name for name in names if name in existing]
        for name in gone:
            delete_topic(self.address, name, client=self.client)
        self._delete_groups(names)
        return gone

    def _delete_groups(self, topics: list[str]) -> None:
        """The cell's consumer groups (named after its topics) would otherwise linger on the cluster until
        offsets.retention.minutes; they are empty once the cell's consumers closed."""
        from .systems.kafka.admin import admin_client

        admin = admin_client(self.address, self.client)
        wanted = {g for t in topics for g in (t, f"{t}-lagging")}
        try:
            listed = admin.list_consumer_groups(request_timeout=15).result(timeout=20)
        except Exception as exc:
            raise BrokerError(f"cannot list consumer groups on {self.address}: {exc}") from exc
        groups = sorted(g.group_id for g in listed.valid if g.group_id in wanted)
        for group, future in (admin.delete_consumer_groups(groups, request_timeout=15) if groups else {}).items():
            try:
                future.result(timeout=20)
            except Exception as exc:
                raise BrokerError(f"could not delete consumer group {group!r}: {exc}") from exc

    async def _delete_streams(self) -> list[str]:
        import nats.js.errors

        from .drivers.nats import connect

        names = self.route_names()
        if not names:
            return []
        spec = self.cell.spec
        assert isinstance(spec, NatsCell)
        nc = await connect(self.address, spec, "sixnines-teardown", self.client)
        gone = []
        try:
            js = nc.jetstream()
            for name in names:
                with contextlib.suppress(nats.js.errors.NotFoundError):
                    await js.delete_stream(name)
                    gone.append(name)
        finally:
            await nc.close()
        return gone

    def stop(self) -> None:
        """Teardown of an external cell: stop watching, delete its routes; the brokers keep running."""
        if self._leaders is not None:
            self._leaders.stop()
        self.delete_routes()

    # -- what the cell records -------------------------------------------------------------------------------
    def _ask_version(self) -> dict[str, Any]:
        """The brokers' own word on their version. Kafka's probe is a separate JVM tool: if it cannot run, the cell
        still runs (topic creation proves the cluster answers) and the context says `unknown` and why."""
        if self.cell.spec.system == "kafka":
            from .systems.kafka.probe import reported_version

            try:
                return reported_version(self.address, self.client)
            except BrokerError as exc:
                return {"version": "unknown", "version_error": str(exc)}
        return run_precise(self._nats_info())

    async def _nats_info(self) -> dict[str, Any]:
        from .drivers.nats import connect

        spec = self.cell.spec
        assert isinstance(spec, NatsCell)
        nc = await connect(self.address, spec, "sixnines-info", self.client)
        try:
            v = nc.connected_server_version
            info = dict(nc._server_info)  # the INFO the server sent on connect (nats-py keeps it as is)
        finally:
            await nc.close()
        keep = (
            "server_id",
            "server_name",
            "version",
            "go",
            "proto",
            "jetstream",
            "cluster",
            "max_payload",
            "tls_required",
        )
        return {
            "version": f"{v.major}.{v.minor}.{v.patch}" + (f"-{v.prerelease}" if v.prerelease else ""),
            "version_source": "the server's INFO on connect (nats-py connected_server_version)",
            "server_info": {k: info[k] for k in keep if k in info},
        }

    def context(self) -> dict[str, Any]:
        if self._context is not None:
            return dict(self._context)
        return {
            "brokers": "external",
            **self.reported,
            "access": self.access.described,
            "names": self.names,
            "routes": self.created or self.route_names(),
            "mode": getattr(self.cell.spec.broker, "mode", None),
        }

    # -- the rest of the Provisioned interface -----------------------------------------------------------------
    def _refuse(self, what: str) -> None:
        raise BrokerError(f"{what} refused: cell {self.cell.id} uses external brokers ({self.cell.spec.connection})")

    def pause(self) -> None:
        self._refuse("stall (SIGSTOP)")

    def resume(self) -> None:
        """Nothing was paused."""

    def kill(self) -> None:
        self._refuse("kill (SIGKILL)")

    def pids(self) -> list[int]:
        return []

    def logs(self) -> list[Path]:
        return []

    def alive(self) -> dict[int, bool]:
        return {}

    def watch_leaders(self) -> None:
        """Kafka: follow the measured topic's partition leaders, as for provisioned clusters."""
        if self.cell.spec.system != "kafka":
            return
        from .drivers.kafka import topic_for
        from .provision import LeaderWatch, kafka_leaders

        topic = topic_for(self.names, final_route(self.cell.spec))
        self._leaders = LeaderWatch(kafka_leaders(self.address, topic, self.client, 2.0))
        self._leaders.start()

    def stop_watching(self) -> None:
        if self._leaders is not None:
            self._leaders.stop()

    def leader_changes(self) -> list[dict[str, int]]:
        return self._leaders.changes() if self._leaders is not None else []


def external_state(brokers: ExternalBrokers) -> dict[str, Any]:
    """What later steps need to find an external cell's routes again: no address, no secret — the connection
    is resolved again by whoever attaches."""
    return {
        "external": True,
        "cell": brokers.cell.model_dump(mode="json"),
        "names": brokers.names,
        "address": brokers.access.described.get("bootstrap_servers") or brokers.access.described.get("servers"),
        "nodes": {},
        "process_name": "",
        "topic": None,
        "logs": [],
        "workdir": str(brokers.workdir),
        "context": brokers.context(),
    }


def attach_external(state: dict[str, Any]) -> ExternalBrokers:
    """An ExternalBrokers from `external_state()`; the connection is resolved when first needed."""
    brokers = ExternalBrokers.__new__(ExternalBrokers)
    brokers.cell = Cell.model_validate(state["cell"])
    brokers.workdir = Path(state["workdir"])
    brokers.names = state["names"]
    brokers._access = None
    brokers._leaders = None
    brokers.created = list(state["context"].get("routes", []))
    brokers.reported = {}
    brokers._context = dict(state["context"])
    return brokers
