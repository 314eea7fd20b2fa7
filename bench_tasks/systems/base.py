"""What the core asks of a broker system: one `System` per system, described by its own package.

The core (matrix parsing, the cell's life, the generator, landing, the CLI, Airflow, Spark, the report) reaches
a system only through this interface and the registry (`bench_tasks.systems`), never by its name, the way
OpenMessaging Benchmark's core never names a driver. Methods that need a system's client library or broker
code import it when called, so parsing a matrix (Airflow does it at DAG parse time) loads neither.

A system's broker and access code is found by convention, so a subclass states only what is its own: the
package's `provision` module (`start_brokers`, `leader_poll`, `controller_poll`, `retarget`,
`describe_running`) and `access` module
(`client_access`, `ask_version`, `route_names`, `delete_routes`), each function taking the method's arguments.
A package without the module or function gets the default below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .. import releases
from ..releases import Release, ReleaseList
from ..spec.cell import CellBase, Measurement
from ..spec.faults import FaultSupport
from ..spec.leader import LeaderSupport

if TYPE_CHECKING:
    from ..brokers.connections import BrokerConnection, ClientAccess
    from ..brokers.handles import StartedBrokers
    from ..brokers.leaders import LeaderPoll
    from ..interop.omb_driver import OmbDriver
    from ..load.contract import WorkerProgram
    from ..load.driver import Driver


class System:
    """A broker system. Subclasses set the class attributes and override what differs from the defaults."""

    name: ClassVar[str]
    cell_model: ClassVar[type[CellBase]]
    # Seconds a cell typically spends outside its schedule on a small host (brokers started and stopped,
    # workers spawned, stragglers drained, the cell landed): what `sixnines cells` plans a sweep with.
    setup_estimate_s: ClassVar[float] = 5.0
    calibration_measurement: ClassVar[Measurement] = "e2e"  # the CTRL+Z test's default shape
    calibration_broker: ClassVar[Mapping[str, Any]] = {}  # one node, the simplest that can be frozen
    client_libraries: ClassVar[tuple[str, ...]] = ()  # distributions whose versions every cell records
    # What a matrix's `faults:` may ask of this system's provisioned nodes (spec.faults): actions (stall, kill,
    # restart) and target kinds (leader, node, random). Nothing unless the system's package declares it.
    fault_actions: ClassVar[frozenset[str]] = frozenset()
    fault_targets: ClassVar[frozenset[str]] = frozenset()
    # Whether its nodes can each run on a host of their own (`workload.placement.broker: [b1, b2, b3]`, network
    # namespaces): `start_brokers` then gets each node's site, and `partition`/`bandwidth` faults have a link to act on.
    node_hosts: ClassVar[bool] = False
    # Seconds a node still shutting down after every other node of its cluster exited is given before SIGKILL, when
    # the system's nodes wait out a quorum that is gone (None: the whole stop grace, as for any node).
    last_node_grace_s: ClassVar[float | None] = None

    def part(self, module: str, function: str) -> Callable[..., Any] | None:
        """`function` of the system package's `module` (imported on first use), or None where there is none."""
        package = type(self).__module__
        try:
            found = importlib.import_module(f"{package}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{module}":
                raise  # the module exists but something it imports does not: a real error
            return None
        return getattr(found, function, None)

    @staticmethod
    def leader_refusal(broker: Any) -> str | None:
        """Why this system cannot place the measured route's leader (`broker.leader`) with these broker settings;
        None where it can (its driver then places the leader when it creates the route, and verifies it)."""
        return "cannot place a leader"

    @staticmethod
    def fault_nodes(broker: Any) -> list[int] | None:
        """The node ids brokers started with these settings (the cell model's `broker`) will have: what `node:N`
        fault targets may name. None: not known before they start (checked when the fault fires)."""
        return None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The system's cell model learns what faults the system supports and whether it places a leader: matrix
        validation checks a cell's `faults:` and `broker.leader` against it, and the spec imports no system."""
        super().__init_subclass__(**kwargs)
        if "cell_model" in cls.__dict__:
            cls.cell_model.FAULTS = FaultSupport(
                cls.name, cls.fault_actions, cls.fault_targets, cls.fault_nodes, cls.node_hosts
            )
            cls.cell_model.LEADERS = LeaderSupport(cls.name, cls.leader_refusal)

    @property
    def versions(self) -> tuple[str, ...]:
        """Releases a cell can run, newest first: the stable ones the cached list says can be assembled (the
        registry is asked when there is no list yet)."""
        return tuple(self.release_list().candidates())

    def list_releases(self) -> list[Release]:
        """Every release the system's registry serves (network), each saying what is missing where it cannot be
        assembled here: the package's `release.list_releases()`."""
        lister = self.part("release", "list_releases")
        if lister is None:
            raise NotImplementedError(f"{self.name} has no release.list_releases: where are its releases served?")
        return list(lister())

    def release_list(self, refresh: bool = False) -> ReleaseList:
        """The cached release list; the registry is asked when `refresh` or when nothing is cached."""
        return releases.known(self.name, self.list_releases, fresh=refresh)

    def releases_for_run(self) -> ReleaseList:
        """The list a run resolves against: refreshed when the run starts (unless fresh), the cache when the
        registry cannot be reached (`offline` says so)."""
        return releases.current(self.name, self.list_releases)

    def resolve_version(self, version: str) -> str:
        """`latest` or a line (`4.3.x`) → the newest release of it that can be assembled; an exact version is
        returned unchanged (fetching it says what is missing, if anything)."""
        return releases.resolve(self.name, self.list_releases, version)

    def label(self, spec: Any) -> str:
        """The system's part of a cell's label (`kafka b3 p1 rf3 acks=all`)."""
        return self.name

    def group_tag(self, spec: Any) -> str:
        """A short tag of the broker's shape for Airflow TaskGroup ids (`c01_<system>_<tag>_<measurement>`)."""
        return "default"

    def sends_acknowledged(self, broker: Mapping[str, Any]) -> bool:
        """Does the broker acknowledge a send (so `publish` latency exists), given the broker settings as a
        mapping (a model's dump, or a spec read back from the lake)?"""
        return True

    def delivery_guaranteed(self, spec: Mapping[str, Any]) -> bool:
        """Must every message the broker acknowledged arrive, so the data-quality gate tolerates no loss of
        one? `spec`: the cell's spec as a mapping (a model's dump, or spec_json read back from the lake). By
        default no: a system promises it only for the settings it names."""
        return False

    def promises_no_acknowledged_loss(self, spec: Mapping[str, Any]) -> bool:
        """Do the cell's durability settings promise that a message the broker acknowledged still arrives when
        one node is stalled, killed or restarted, so the gate refuses a fault that cost an acknowledged message
        (`acknowledged_but_lost`)? Stronger than `delivery_guaranteed` (no loss while every node runs): it needs
        the acknowledgement to wait for a majority of at least three copies. Landing records it per cell
        (`durable_acks`). By default no: a system promises it only for the settings it names."""
        return False

    def acked_metric(self, spec: Mapping[str, Any]) -> str | None:
        """What an acknowledgement means in a cell: an rtt reply, the broker's ack of a send (`publish`), or
        nothing when the broker does not acknowledge sends. Landing records it per cell; Spark reads it."""
        if spec.get("measurement") == "rtt":
            return "rtt"
        return "publish" if self.sends_acknowledged(spec.get("broker") or {}) else None

    # -- releases ---------------------------------------------------------------------------------------------------
    def fetch_release(self, version: str) -> Path:
        """Fetch (once, verified) and return where a release lives in the cache."""
        raise NotImplementedError(f"{self.name} has no releases to fetch")

    def describe_running(self, state: Mapping[str, Any]) -> list[str]:
        """Lines about running brokers (from a handle's state) worth showing in `sixnines brokers status`."""
        describe = self.part("provision", "describe_running")
        return describe(state) if describe else []

    def driver(self, address: str, spec: Any, names: str, route: str, client: Mapping[str, Any] | None) -> Driver:
        """The client driver for one route of a cell (load.driver.Driver)."""
        raise NotImplementedError(f"{self.name} has no driver")

    def worker_program(self, spec: Any, role: str) -> WorkerProgram | None:
        """The worker program (docs/workers.md) that plays `role` in a cell of this system, or None for the Python
        worker, which is every system's default."""
        return None

    def background_spec(self, spec: Any, background: Any) -> Any:
        """The cell as a background route's driver sees it: by default the cell itself (a system with route
        layouts of its own, such as partitions, builds them from the background's settings)."""
        return spec

    def omb_driver(self) -> OmbDriver | None:
        """How OpenMessaging Benchmark's driver for this system reads in sixnines terms (None: OMB has none)."""
        return None

    # -- brokers a cell starts -------------------------------------------------------------------------------------
    def start_brokers(
        self,
        spec: Any,
        names: str,
        workdir: Path,
        tie_to_parent: bool,
        host: str,
        sites: Mapping[int, tuple[str, str]] | None = None,
    ) -> StartedBrokers:
        """Start what `spec` needs on `host` (127.0.0.1, or a namespace host's address, in whose namespace the
        calling thread already is) and return once it is ready for traffic. `names`: the token the cell's routes
        are named from (for the route whose leader is watched). `sites`: with one host per node (`node_hosts`),
        node id -> (network namespace, address) each node starts in and listens on; the calling thread is then in
        a namespace that reaches them all."""
        start = self.part("provision", "start_brokers")
        if start is None:
            raise NotImplementedError(f"{self.name} cannot provision brokers")
        if sites is not None:
            return start(spec, names, workdir, tie_to_parent, host, sites)
        return start(spec, names, workdir, tie_to_parent, host)

    def leader_poll(
        self,
        address: str,
        client: Mapping[str, Any],
        ref: Mapping[str, Any],
        patient: bool,
        paused: Callable[[], int | None],
    ) -> LeaderPoll | None:
        """A poll of who leads the route `ref` names (partition -> node), or None when nothing leads. `patient`:
        a fault waits longer for an answer than the watch does; `paused()`: a node known to be frozen."""
        poll = self.part("provision", "leader_poll")
        return poll(address, client, ref, patient, paused) if poll else None

    def controller_poll(
        self, address: str, client: Mapping[str, Any], ref: Mapping[str, Any], paused: Callable[[], int | None]
    ) -> Callable[[], int | None] | None:
        """A poll of the node that leads the cluster's metadata now (Kafka's active KRaft controller, the JetStream
        meta leader; None during an election), or None where the system has no such node: a fault's `controller`
        target."""
        poll = self.part("provision", "controller_poll")
        return poll(address, client, ref, paused) if poll else None

    def retarget_leader(self, ref: Mapping[str, Any] | None, spec: Any, names: str) -> dict[str, Any] | None:
        """A reused cluster's leader reference made the next cell's."""
        retarget = self.part("provision", "retarget")
        if retarget is not None:
            return retarget(ref, spec, names)
        return dict(ref) if ref else None

    # -- brokers a cell does not own (`brokers: external`) ---------------------------------------------------------
    def client_access(self, conn: BrokerConnection, spec: Any) -> ClientAccess:
        """How the harness's clients reach brokers it did not start (address, security settings)."""
        access = self.part("access", "client_access")
        if access is None:
            raise NotImplementedError(f"{self.name} cannot reach external brokers")
        return access(conn, spec)

    def ask_version(self, address: str, client: Mapping[str, Any], spec: Any) -> dict[str, Any]:
        """What the brokers say they are (recorded in the context)."""
        ask = self.part("access", "ask_version")
        if ask is not None:
            return ask(address, client, spec)
        return {"version": "unknown", "version_error": f"{self.name} has no version probe"}

    def route_names(self, spec: Any, names: str) -> list[str]:
        """The named resources the cell's routes create on the brokers (topics, streams), if any."""
        named = self.part("access", "route_names")
        return named(spec, names) if named else []

    def delete_routes(self, address: str, client: Mapping[str, Any], spec: Any, names: str) -> list[str]:
        """Delete what `route_names` names, where it exists; returns what the brokers confirmed deleted. A system
        that can tell a refusal apart raises RoutesNotDeleted (what was deleted, and why each other was not)."""
        delete = self.part("access", "delete_routes")
        return delete(address, client, spec, names) if delete else []

    def leader_ref(self, spec: Any, names: str) -> dict[str, Any] | None:
        """External brokers: the reference `leader_poll` follows for the measured route, if the system can ask."""
        return None

    def external_context(self, spec: Any) -> dict[str, Any]:
        """Settings of an external cell worth recording beside what the brokers report."""
        return {}
