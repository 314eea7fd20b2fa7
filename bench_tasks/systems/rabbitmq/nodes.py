"""RabbitMQ nodes for one cell: 1 node or a 3-node cluster on free ports of one host address, with a private epmd.

Each node is Debian's `rabbitmq-server` run with its own node name (`n1@<host>` …), AMQP and Erlang distribution
ports and folder under the cell's workdir (`nodefiles.py`); the cell has its own cookie and its own epmd, started
by the harness in the foreground on a free port, so nothing registers with or starts a shared epmd on 4369.
Node 1 starts blank; nodes 2 and 3 start together once it runs RabbitMQ, with node 1 as their peer-discovery seed.
Started all at once, a joiner that found the seed still booting copied its state too early: its schema (the seed
still upgrading it, `_rejoin`) or its feature flags (a node then refused to declare a quorum queue, "the
corresponding feature flag is disabled", seen once the nodes booted in ~2 s). On two cores three VMs booting
together are hardly faster than the seed first. Ready means every node says `rabbit:is_running()` and sees all
nodes running.

Control goes over Erlang distribution with OTP's `erl_call` (`erl.py`), milliseconds per question, no management
plugin. `stop()` ends the nodes (SIGTERM, SIGKILL after a grace), then their helper processes (erl_child_setup,
inet_gethost) if any outlived them, then epmd: nothing is left running and nothing is written outside the
workdir.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import psutil

from ...brokers.cluster import NodeCluster, stop_pids
from ...brokers.patience import with_patience
from ...brokers.ports import free_ports
from ...brokers.process import BrokerProcess
from ...errors import BrokerError
from . import erl, release
from .home import write_home
from .nodefiles import Credentials, NodePlan, node_argv, node_env, node_settings, write_cookie, write_node_files
from .settings import RabbitmqBroker

_SCHEMA_RACE = "schema_integrity_check_failed"  # a joining node copied a schema the seed was still upgrading

HELPER_NAMES = ("erl_child_setup", "inet_gethost")


@dataclass(frozen=True)
class RabbitNode:
    """One node: how to reach it and the exact config it was given."""

    index: int
    name: str
    pid: int
    amqp_url: str
    amqp_port: int
    dist_port: int
    config: str
    log_path: str


@dataclass(frozen=True)
class RabbitEndpoint:
    """How to reach the running nodes, and what they are (no secrets: the cookie stays in `home`)."""

    url: str  # every node's AMQP URL, comma-separated (the harness's address string)
    host: str
    version: str  # as node 1 reports it
    erlang: str  # OTP release as node 1 reports it
    nodes: tuple[RabbitNode, ...]
    epmd_port: int
    epmd_pid: int
    home: str  # the cell's Erlang home: its .erlang.cookie, for erl_call
    ready_after_s: float
    workdir: str

    @property
    def pids(self) -> dict[int, int]:
        return {node.index: node.pid for node in self.nodes}


def amqp_urls(url: str) -> list[str]:
    """The node URLs in a (possibly comma-separated) address string."""
    return [part.strip() for part in url.split(",") if part.strip()]


class RabbitCluster(NodeCluster):
    """`broker.nodes` RabbitMQ nodes (1 or 3) and their epmd, for one cell (or one `brokers up`), on `host`."""

    KIND: ClassVar[str] = "RabbitMQ"
    STOP_GRACE_S: ClassVar[float] = 30.0

    def __init__(
        self,
        version: str,
        broker: RabbitmqBroker,
        workdir: Path | str,
        tie_to_parent: bool = True,
        host: str = "127.0.0.1",
    ):
        super().__init__(release.resolve_version(version), workdir, tie_to_parent, host)
        self.broker = broker
        self.plans: dict[int, NodePlan] = {}
        self.configs: dict[int, str] = {}
        self.epmd: BrokerProcess | None = None
        self.paused: set[int] = set()
        self.helpers: dict[int, list[int]] = {}
        self.rejoined: set[int] = set()
        self.endpoint: RabbitEndpoint | None = None
        self.user = Credentials.of(broker)  # the cell's one user; clients get it through the client settings
        self.script: Path | None = None
        self.server_apps: list[str] = []

    @property
    def home(self) -> Path:
        return self.workdir / "erlang"

    @property
    def server_home(self) -> Path:
        return self.workdir / "rabbitmq-home"

    def start(self, timeout_s: float = 120.0) -> RabbitEndpoint:
        """Start epmd and every node, and return once the cluster is ready. Call it from a thread that outlives
        the nodes: PR_SET_PDEATHSIG fires when the *thread* that started a process exits."""
        timeout_s = with_patience(timeout_s)
        if self.processes or self.epmd is not None:
            raise BrokerError("this RabbitMQ cluster was already started; make a new RabbitCluster")
        began = time.monotonic()
        release_dir = release.server_script(self.version).parent.parent
        try:
            self._prepare(release_dir)
            self._start_epmd(began + timeout_s)
            self._launch(1)
            if len(self.plans) > 1:  # the joining nodes once the seed runs (module docstring)
                self._wait_ready(began + timeout_s, timeout_s, nodes=[1])
                for index in list(self.plans)[1:]:
                    self._launch(index)
            self._wait_ready(began + timeout_s, timeout_s)
            self.endpoint = self._describe(round(time.monotonic() - began, 3))
        except BaseException:
            self.stop()
            raise
        return self.endpoint

    def _prepare(self, release_dir: Path) -> None:
        """Fresh folders, the server home the nodes run from, free ports, the cell's cookie and every node's
        files."""
        count = self.broker.nodes
        for stale in (self.home, *(self.workdir / f"n{i}" for i in range(1, count + 1))):
            shutil.rmtree(stale, ignore_errors=True)  # a stale data dir holds another cluster's members
        self.server_apps = write_home(release_dir, self.server_home)
        self.script = self.server_home / "sbin" / "rabbitmq-server"
        ports = free_ports(1 + 2 * count, self.host)
        write_cookie(self.home, secrets.token_hex(20))
        seed = erl.node_name(1, self.host)
        for index in range(1, count + 1):
            plan = NodePlan(
                index=index,
                name=erl.node_name(index, self.host),
                host=self.host,
                amqp_port=ports[2 * index - 1],
                dist_port=ports[2 * index],
                folder=self.workdir / f"n{index}",
                home=self.home,
                epmd_port=ports[0],
                server_home=self.server_home,
            )
            self.plans[index] = plan
            settings = node_settings(plan, None if index == 1 else seed, self.broker, self.user)
            self.configs[index] = write_node_files(plan, settings)

    def _start_epmd(self, deadline: float) -> None:
        port = self.plans[1].epmd_port
        argv = ["epmd", "-port", str(port), "-address", self.host]
        self.epmd = BrokerProcess(argv, self.workdir / "epmd.log", self.tie_to_parent)
        while not _listening(self.host, port):
            if not self.epmd.alive():
                raise BrokerError(f"epmd exited during start:\n{self.epmd.log_tail()}")
            if time.monotonic() > deadline:
                raise BrokerError(f"epmd not listening on {self.host}:{port}")
            time.sleep(0.02)

    def _launch(self, index: int) -> None:
        plan = self.plans[index]
        assert self.script is not None, "_prepare() comes first"
        argv = node_argv(self.script, node_env(plan, self.broker))
        self.processes[index] = BrokerProcess(argv, plan.log_path, self.tie_to_parent)
        self.paused.discard(index)

    def _wait_ready(self, deadline: float, timeout_s: float, nodes: list[int] | None = None) -> None:
        """Until every node in `nodes` (default all, each of which must run) runs RabbitMQ and sees every node
        whose process runs as running: after a restart, a node killed earlier and not restarted is not awaited."""
        awaited = nodes or list(self.plans)
        waiting_for = "the nodes to answer"
        while time.monotonic() < deadline:
            for index in awaited:
                proc = self.processes[index]
                if not proc.alive() and not self._rejoin(index):
                    raise BrokerError(
                        f"RabbitMQ node {index} exited with code {proc.popen.returncode} during start: "
                        f"{boot_errors(proc.log_path) or proc.log_tail(30)}\n(log: {proc.log_path})"
                    )
            waiting_for = self._not_ready(awaited)
            if not waiting_for:
                for index in awaited:
                    self.helpers[index] = _helper_pids(self.processes[index].pid)
                return
            time.sleep(0.1)
        tails = "\n".join(f"--- node {i} ({p.log_path}):\n{p.log_tail(10)}" for i, p in self.processes.items())
        raise BrokerError(f"RabbitMQ cluster not ready after {timeout_s:.0f}s, waiting for {waiting_for}\n{tails}")

    def _rejoin(self, index: int) -> bool:
        """A joining node that stopped on `schema_integrity_check_failed` is started once more, on a fresh data
        folder, as soon as the seed node runs; True while that is under way (False: a failure to report).

        Why: all nodes boot at once, and a node that copies the seed's schema while the seed is still enabling
        its feature flags (RabbitMQ 3.10 adds `limits` to `rabbit_user` and `metadata` to `rabbit_vhost` during
        its first boot) finds its tables differ and stops. Seen once in a clean CI run on a loaded host; joining
        again once the seed is up is what an operator would do."""
        proc = self.processes[index]
        if index == 1 or index in self.rejoined or _SCHEMA_RACE not in (boot_errors(proc.log_path) or ""):
            return False
        if self.ask(1, "atom_to_list(rabbit:is_running())") != "true":
            return True  # the seed is still booting: look again on the next pass
        with contextlib.suppress(Exception):
            proc.stop()
        plan = self.plans[index]
        shutil.rmtree(plan.data_dir, ignore_errors=True)
        plan.data_dir.mkdir(parents=True)
        self.rejoined.add(index)
        self._launch(index)
        return True

    def _not_ready(self, nodes: list[int]) -> str:
        """What the cluster is still waiting for, or '' once it is ready."""
        expected = {self.plans[i].name for i in self._answering()}
        for index in nodes:
            if self.ask(index, "atom_to_list(rabbit:is_running())") != "true":
                return f"node {index} to run RabbitMQ"
            running = set((self.ask(index, erl.strings("rabbit_nodes:all_running()")) or "").split())
            if running != expected:
                return f"node {index} to see {sorted(expected)} running (it sees {sorted(running)})"
        return ""

    def ask(self, index: int, expr: str, timeout_s: float = 2.0) -> str | None:
        """Evaluate `expr` (returning a flat string) on node `index`; None if it does not answer."""
        plan = self.plans[index]
        return erl.evaluate(plan.host, plan.dist_port, expr, self.home, timeout_s)

    def _describe(self, ready_after_s: float) -> RabbitEndpoint:
        version = self.ask(1, "rabbit_misc:version()") or "?"
        if version != self.version:
            raise BrokerError(f"RabbitMQ node 1 reports version {version}, expected {self.version}")
        nodes = tuple(
            RabbitNode(
                index=i,
                name=plan.name,
                pid=self.processes[i].pid,
                amqp_url=f"amqp://{plan.host}:{plan.amqp_port}/",
                amqp_port=plan.amqp_port,
                dist_port=plan.dist_port,
                config=self.configs[i],
                log_path=str(plan.log_path),
            )
            for i, plan in self.plans.items()
        )
        assert self.epmd is not None
        return RabbitEndpoint(
            url=",".join(node.amqp_url for node in nodes),
            host=self.host,
            version=version,
            erlang=self.ask(1, "rabbit_misc:otp_release()") or "?",
            nodes=nodes,
            epmd_port=self.plans[1].epmd_port,
            epmd_pid=self.epmd.pid,
            home=str(self.home),
            ready_after_s=ready_after_s,
            workdir=str(self.workdir),
        )

    # --- the broker-control protocol ---------------------------------------------------------------------

    def pause(self, node_id: int) -> None:
        """SIGSTOP node `node_id`'s VM (the CTRL+Z test); its peers see it as unresponsive, not gone."""
        super().pause(node_id)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        super().resume(node_id)
        self.paused.discard(node_id)

    def kill(self, node_id: int) -> None:
        """SIGKILL node `node_id`'s VM, no restart; its helper processes exit with it."""
        super().kill(node_id)
        self.paused.discard(node_id)
        _end_helpers(self.helpers.pop(node_id, []))

    def restart(self, node_id: int, timeout_s: float = 120.0) -> None:
        """Start node `node_id` again on its own data (after `kill`): it rejoins its cluster by itself, and this
        returns once it runs and every node sees the whole cluster again."""
        timeout_s = with_patience(timeout_s)
        proc = self._node(node_id)
        if proc.alive():
            raise BrokerError(f"RabbitMQ node {node_id} is still running (pid {proc.pid}); kill it first")
        proc.stop()  # closes the old log handle
        self._launch(node_id)
        self._wait_ready(time.monotonic() + timeout_s, timeout_s, nodes=self._answering())

    def _answering(self) -> list[int]:
        """Nodes whose VM runs and is not frozen: the ones that can answer a question."""
        return [i for i, proc in self.processes.items() if proc.alive() and i not in self.paused]

    def alive(self) -> dict[int, bool]:
        return {index: proc.alive() for index, proc in self.processes.items()}

    def leader(self, route: str) -> int | None:
        """Node (1-based) that leads queue or stream `route` in vhost '/' now, as the first running, unfrozen
        node sees it (the queue's leader for quorum queues and streams, its home node for a classic queue);
        None when no node answers or the queue has no known leader."""
        answer = self._first_answer(erl.leader_expr(route))
        return None if answer is None else erl.node_index(answer)

    def members(self, route: str) -> list[int]:
        """Nodes holding a replica of quorum queue or stream `route` (its home node for a classic queue)."""
        answer = self._first_answer(erl.members_expr(route))
        return [] if answer is None else sorted(i for i in map(erl.node_index, answer.split()) if i is not None)

    def _first_answer(self, expr: str) -> str | None:
        """The first answering node's answer: each node gets 1 s so that one cut off by a fault costs little,
        then, when none answered, 5 s each: on a host at load 17 no node answered within 1 s (seen once)."""
        for timeout_s in (1.0, 5.0):
            for index in self._answering():
                answer = self.ask(index, expr, timeout_s=timeout_s)
                if answer is not None:
                    return answer
        return None

    def context(self) -> dict[str, Any]:
        """What the cell records: versions as the nodes report them, the exact config, pids and ports."""
        if self.endpoint is None:
            raise BrokerError("the RabbitMQ cluster has not been started")
        described = asdict(self.endpoint)
        described.pop("home")
        return described | {
            "package": release.package_version(),
            "erlang_package": release.erlang_package_version(),
            "erl_args": self.broker.erl_args,
            "server_apps": self.server_apps,
            "pids": self.node_pids,
        }

    def stop(self, grace_s: float | None = None) -> list[int]:
        """Every node at once (SIGTERM, SIGKILL after the grace), then helpers left behind, then epmd; returns
        the node PIDs that were still running."""
        running = super().stop(grace_s)
        _end_helpers([pid for pids in self.helpers.values() for pid in pids])
        self.helpers.clear()
        if self.epmd is not None:
            self.epmd.stop(grace_s=5.0)
        return running

    def companions(self) -> list[tuple[int, str]]:
        """Processes serving the nodes that a detached stop must end too: the cell's epmd, then the nodes' port
        helpers (they exit with their VM; listed in case one outlives it)."""
        epmd = [(self.epmd.pid, "epmd")] if self.epmd is not None else []
        helpers = [(pid, name) for pids in self.helpers.values() for pid in pids if (name := _helper_name(pid))]
        return epmd + helpers

    def state(self) -> dict[str, Any]:
        """JSON to re-attach from another process (`stop_detached` ends it); the cookie stays in `home`."""
        return super().state() | {"helpers": {str(i): pids for i, pids in self.helpers.items()}}


def stop_detached(state: dict[str, Any], grace_s: float = 30.0) -> list[int]:
    """Stop a detached cluster (from `RabbitCluster.state()`) by PID: its nodes (each checked to be a beam.smp
    before it is signalled), then helpers they left, then its epmd. Returns the node PIDs that were running."""
    stopped = stop_pids([int(node["pid"]) for node in state["nodes"]], "beam.smp", grace_s)
    _end_helpers([pid for pids in state.get("helpers", {}).values() for pid in pids])
    stop_pids([int(state["epmd_pid"])], "epmd", 5.0)
    return stopped


def boot_errors(log_path: Path, limit: int = 12) -> str:
    """The first error lines a node logged (before BOOT FAILED): where RabbitMQ says what it refused, e.g.
    "You've tried to set no_such_setting, but there is no setting with that name."."""
    try:
        lines = log_path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    errors = []
    for line in lines:
        if " [error] " not in line:
            continue
        text = line.split("> ", 1)[-1].rstrip()
        if text.startswith("BOOT FAILED") or len(errors) == limit:
            break
        if text.strip():
            errors.append(text)
    return "\n".join(errors)


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _helper_pids(beam_pid: int) -> list[int]:
    """erl_child_setup and its port programs under a node's VM, to end them should they outlive it."""
    try:
        return [p.pid for p in psutil.Process(beam_pid).children(recursive=True) if p.name() in HELPER_NAMES]
    except psutil.NoSuchProcess:
        return []


def _end_helpers(pids: list[int], wait_s: float = 5.0) -> None:
    """Helpers exit on their own when their VM dies; give them `wait_s`, then SIGKILL any still running (each
    checked by name, so a reused PID is never signalled). A zombie has ended: only its new parent can reap it."""
    deadline = time.monotonic() + wait_s
    running = [pid for pid in pids if _running_helper(pid)]
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        running = [pid for pid in running if _running_helper(pid)]
    for pid in running:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


def _helper_name(pid: int) -> str | None:
    """The name of a running helper process `pid`, None once it has gone."""
    try:
        proc = psutil.Process(pid)
        return proc.name() if proc.name() in HELPER_NAMES and proc.status() != psutil.STATUS_ZOMBIE else None
    except psutil.NoSuchProcess:
        return None


def _running_helper(pid: int) -> bool:
    try:
        proc = psutil.Process(pid)
        return proc.name() in HELPER_NAMES and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
