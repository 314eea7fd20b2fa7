"""A real Airflow CeleryExecutor deployment on this one machine, for one test: what proves that a task routed to a
load-generator queue (`queue=` on the operator) runs on the Celery worker serving that queue, and that tasks on
different queues run at the same time.

    airflow db migrate              SQLite metadata DB (tests/airflow_project.py)
    airflow api-server              the execution API the workers' task runners talk to over HTTP
                                    ([core] execution_api_server_url), on a free loopback port
    airflow celery worker × N       one per queue (default, loadgen_1, loadgen_2), each its own host name
    airflow dags test --use-executor  queues every ready task to the CeleryExecutor and follows the run
                                    (the scheduler's own event processing; no scheduler or DAG processor)

Celery needs a broker and a result backend; these need no server process: kombu's filesystem transport (a
folder of message files, with fanout, so Celery's remote control and Airflow's duplicate-hostname check work)
and Celery's SQLAlchemy result backend on a SQLite file (`db+sqlite:///`), which Airflow's executor reads in
bulk. A worker on a real host would name a Redis/RabbitMQ broker instead (docker-compose.yaml: Redis).

Host names: Airflow records in each task instance the `hostname` of the machine whose worker ran it
(`[core] hostname_callable`, the FQDN by default). Here every worker runs on one machine, so each worker is
given the host name it would have on its own machine through that option (`worker_hostname` below reads it
from the worker's environment), the same name as its Celery node name — the way `loadgen1`/`loadgen2` are
the host names of the docker-compose workers.

Every process is started in its own session and stopped with its process group (SIGTERM to the leader, then
SIGKILL to the group; SIGKILL at once when no task is at work), even when the test fails; a leader is watched
without being reaped until then, so no signal of the fixture can reach a recycled PID or group id; anything the
deployment's tasks left behind (every such process carries the project's `ROOT` in its environment) is killed
too and reported, so a leak fails the test without outliving it."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench_tasks.brokers.ports import free_port
from tests.airflow_project import BIN, REPO, migrate
from tests.processes import unreaped_exit

QUEUES = ("default", "loadgen_1", "loadgen_2")  # the docker-compose workers' queues
HOSTNAME_ENV = "SIXNINES_TEST_WORKER_HOSTNAME"
DIAGNOSTICS = REPO / "tests" / "celery_diagnostics"
# the celery provider's log line for a workload a worker executes (celery_executor_utils.execute_workload)
EXECUTING = re.compile(r"Executing workload in Celery: .*? ti=TaskInstance\w*\(id=UUID\('([0-9a-f-]+)'\)")


def worker_hostname() -> str:
    """`[core] hostname_callable` of the test's workers: the host name the worker would have on its own machine
    (set per worker in its environment); the FQDN, as Airflow's default, in any other process."""
    return os.environ.get(HOSTNAME_ENV) or socket.getfqdn()


def host_of(queue: str) -> str:
    """The worker host serving `queue`, named as in docker-compose.yaml: loadgen_1 → loadgen1."""
    return queue.replace("_", "")


@dataclass
class Service:
    """One long-running Airflow process of the deployment, the leader of its own process group."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, chars: int = 3000) -> str:
        try:
            return f"--- {self.name} ({self.log}) ---\n" + self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return f"--- {self.name}: no log ---"

    def exited(self) -> bool:
        """Whether the leader has exited, without reaping it (a zombie until `stop` reaps it): while it is not
        reaped its PID, and with it its group id, can name no other process; once reaped, the next process
        started may be given that number (pid_max is 32768 here: a long session recycles PIDs)."""
        if self.proc.returncode is not None:
            return True
        try:
            return self._waitid() is not None
        except ChildProcessError:  # reaped by some other waiter: gone
            return True

    def _waitid(self) -> os.waitid_result | None:
        return unreaped_exit(self.proc.pid)

    def how_it_ended(self) -> str:
        """`exited 0`, `killed by SIGKILL`, ... An Airflow CLI process in the foreground turns SIGTERM and SIGINT
        into `exit(0)` (airflow.utils.cli.sigint_handler): `exited 0` during start-up means one of those, unless
        its log says it ended on its own. (Popen says 0 too of a child some other waiter reaped: told apart here.)"""
        if self.proc.returncode is not None:
            return f"exited {self.proc.returncode} (reaped)"
        try:
            status = self._waitid()
        except ChildProcessError:
            return "was reaped by another waiter in this process: its exit status is lost"
        if status is None:
            return "is running"
        if status.si_code == os.CLD_EXITED:
            return f"exited {status.si_status}"
        return f"killed by {signal.Signals(status.si_status).name}"

    def terminate(self) -> None:
        """SIGTERM the leader (Celery's warm shutdown, uvicorn's graceful one), without waiting. Only the leader:
        a Celery worker whose pool processes got the signal too hung in its shutdown for 20 s and more when the
        three workers stopped at once (one at a time 1-6 s each); told alone, each stops its pool itself. Never
        once it has exited: its PID is then no longer its own to signal."""
        if not self.exited():
            os.kill(self.proc.pid, signal.SIGTERM)

    def kill_group(self) -> None:
        """SIGKILL the leader's whole group (its children too, even when the leader has exited), unless the
        leader has been reaped: with the leader and every other member gone, its group id is a free PID that a
        process started since (a session leader, as every service here is) may have been given."""
        try:
            self._waitid()  # our child still, running or a zombie: its group id is its own
        except ChildProcessError:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self, grace_s: float = 20) -> None:
        """`terminate`, SIGKILL the whole group after `grace_s` (or at once once the leader is gone); reaps it."""
        if not self.exited():
            self.terminate()
            deadline = time.monotonic() + grace_s
            while not self.exited() and time.monotonic() < deadline:
                time.sleep(0.05)
        self.kill_group()
        self.proc.wait()


@dataclass
class CeleryAirflow:
    """A running deployment: its environment, its services, and the queue → worker host name map."""

    env: dict[str, str]
    workers: dict[str, str]  # queue → host name (== Celery node name's host part)
    services: list[Service] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # processes the tasks left behind, killed at stop

    @property
    def root(self) -> Path:
        return Path(self.env["ROOT"])

    def start(self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None) -> Service:
        log = self.root / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [str(BIN / "airflow"), *args],
                env=dict(env or self.env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.root,
                start_new_session=True,
            )
        service = Service(name, proc, log)
        self.services.append(service)
        return service

    def dags_test(
        self, dag_id: str, logical_date: str, *extra: str, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        """`airflow dags test DAG DATE --use-executor`: every task goes through Celery. Its own process group,
        killed whole if it overruns `timeout` (the result then has return code -9 and the log so far)."""
        args = ["dags", "test", dag_id, logical_date, "--use-executor", *extra]
        service = self.start(f"dags-test-{dag_id}-{logical_date}", args)
        try:
            code = service.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            service.stop(grace_s=5)
            code = -9
        self.services.remove(service)
        return subprocess.CompletedProcess(args, code, service.log.read_text(errors="replace"), "")

    def run_scheduled(self, dag_id: str, timeout: float = 900) -> dict[str, object]:
        """The production path instead of `dags_test`: start the DAG processor and the scheduler (pools, priority
        and the executor's task adoption as in a deployment), with DAGs created unpaused, so the scheduler makes
        the DAG's latest scheduled run (catchup is off: exactly one); wait until that run finishes and return its
        row (`run_id`, `state`, `logical_date`). Both services are stopped with the deployment."""
        # The scheduler loops again at once after work, else after its idle sleep: 0.2 s instead of 1 s, so that
        # each of the run's ~12 tasks does not wait up to a second to be scheduled after the one before it.
        unpaused = {
            **self.env,
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.2",
        }
        # A DAG that `dags test` already registered keeps the paused state it was created with: unpause it, while
        # the two services start (the scheduler makes no run of a paused DAG; the CLI takes seconds to import).
        unpause = subprocess.Popen(
            [str(BIN / "airflow"), "dags", "unpause", dag_id],
            env=self.env,
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started = [
            self.start("dag-processor", ["dag-processor"], env=unpaused),
            self.start("scheduler", ["scheduler", "--skip-serve-logs"], env=unpaused),
        ]
        unpause.wait()
        deadline = time.monotonic() + timeout
        while True:
            runs = self._query(
                "SELECT run_id, state, logical_date FROM dag_run WHERE dag_id = ? AND run_type = 'scheduled'", (dag_id,)
            )
            finished = [r for r in runs if r["state"] in ("success", "failed")]
            if finished:
                return finished[0]
            dead = [f"{s.name} {s.how_it_ended()}" for s in started if s.exited()]
            if dead or time.monotonic() > deadline:
                why = dead[0] if dead else f"no run finished within {timeout:.0f} s ({runs})"
                raise RuntimeError(f"{dag_id}: {why}\n" + self.logs())
            time.sleep(0.5)  # a read-only query of the SQLite file

    def _query(self, sql: str, args: tuple[object, ...]) -> list[dict[str, object]]:
        db = Path(self.env["AIRFLOW_HOME"]) / "airflow.db"
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as conn:
            conn.row_factory = sqlite3.Row
            return [dict(r) for r in conn.execute(sql, args).fetchall()]

    def _at_work(self) -> bool:
        """Whether any task instance is queued or running (or the metadata DB cannot tell)."""
        try:
            (row,) = self._query(
                "SELECT count(*) AS n FROM task_instance WHERE state IN ('queued', 'running', 'restarting')", ()
            )
        except sqlite3.Error:
            return True
        return bool(row["n"])

    def task_instances(self, dag_id: str) -> list[dict[str, object]]:
        """Every task instance of `dag_id` straight from the metadata DB (the row the UI shows)."""
        return self._query(
            "SELECT id, task_id, run_id, map_index, state, queue, hostname, try_number, start_date, end_date "
            "FROM task_instance WHERE dag_id = ? ORDER BY start_date",
            (dag_id,),
        )

    def executed_by(self) -> dict[str, str]:
        """Celery's side of the record: task instance id → host of the worker whose log shows it executing that
        task instance's workload (the provider logs each workload it receives, with the TI in it)."""
        ran: dict[str, str] = {}
        for service in self.services:
            if service.name.startswith("worker-"):
                for ti_id in EXECUTING.findall(service.log.read_text(errors="replace")):
                    ran[ti_id.replace("-", "")] = service.name.removeprefix("worker-")  # as the DB stores it
        return ran

    def logs(self) -> str:
        return "\n".join(s.tail() for s in self.services)

    def stop(self) -> None:
        """The scheduler and DAG processor, the workers, then the API server (what a task that is still running
        reports to); each wave told to stop at once and then waited for (a worker's warm shutdown or uvicorn's
        takes ~6 s: one after the other they added ~15 s to the test). Once no task instance is queued or running
        nothing is at work that a shutdown could let finish: every service's group is killed at once (the warm
        shutdowns took ~15-20 s more in this order). Then anything a task left behind."""
        if self.services and not self._at_work():
            for service in self.services:
                service.kill_group()
            for service in self.services:
                service.proc.wait()
            self.services.clear()
        waves = (
            [s for s in self.services if s.name in ("scheduler", "dag-processor")],
            [s for s in self.services if s.name not in ("scheduler", "dag-processor", "api-server")],
            [s for s in self.services if s.name == "api-server"],
        )
        for wave in waves:
            for service in wave:
                service.terminate()
            for service in wave:
                service.stop()
        self.services.clear()
        self.leftovers = _kill_descendants_of_root(str(self.root))


def _kill_descendants_of_root(root: str) -> list[str]:
    """Processes whose environment carries this deployment's ROOT (every process it or its tasks started
    inherits it) and are still alive: SIGKILL each by pid; returns what was found."""
    import psutil

    found = []
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get("ROOT") != root:
                continue
            found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or ())[:100]}")
            proc.kill()
            proc.wait(timeout=10)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, psutil.TimeoutExpired):
            continue
    return found


def celery_env(env: Mapping[str, str], api_port: int) -> dict[str, str]:
    """The project's environment plus the CeleryExecutor settings every process of the deployment shares."""
    home = Path(env["AIRFLOW_HOME"])
    broker = home / "celery"
    for folder in ("messages", "control", "processed"):
        (broker / folder).mkdir(parents=True, exist_ok=True)
    return {
        **env,
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        # one secret for the token signer (dags test's executor) and its verifier (the API server)
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__CELERY__BROKER_URL": "filesystem://",
        # producers and consumers share one folder: a message file is written there and taken from there
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__DATA_FOLDER_IN": str(broker / "messages"),
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__DATA_FOLDER_OUT": str(broker / "messages"),
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__CONTROL_FOLDER": str(broker / "control"),
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__PROCESSED_FOLDER": str(broker / "processed"),
        # a worker looks for new message files every 0.1 s, not every 1 s (kombu's default): each task waited
        # ~1 s in the folder before a worker took it, 10 tasks a run
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__POLLING_INTERVAL": "0.1",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+sqlite:///{home / 'celery-results.db'}",
        "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",  # send and poll from the executor's process, no pool
        # first: tests/celery_diagnostics/sitecustomize.py, which logs each SIGTERM/SIGINT/SIGHUP/SIGQUIT received
        "PYTHONPATH": os.pathsep.join(p for p in (str(DIAGNOSTICS), str(REPO), env.get("PYTHONPATH", "")) if p),
    }


def _wait_until(
    ready: Callable[[], bool], what: str, services: list[Service], timeout_s: float, root: Path | None = None
) -> None:
    """Wait until `ready`; a RuntimeError with every service's log tail if one of `services` exits first or time
    runs out, and then also the other processes of the host (`root`: the deployment's, left out)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        dead = [s for s in services if s.exited()]
        if dead or time.monotonic() > deadline:
            why = f"{dead[0].name} {dead[0].how_it_ended()}" if dead else f"not within {timeout_s:.0f} s"
            others = f"\n--- the host's other processes, newest first ---\n{_others(root)}" if root else ""
            raise RuntimeError(f"{what}: {why}\n" + "\n".join(s.tail() for s in services) + others)
        time.sleep(0.5)


def _others(root: Path, limit: int = 40) -> str:
    """The host's processes outside the deployment at `root` (none of its ROOT), newest first: what was running
    when a service ended, a hint at who may have signalled it (its log says which signal, and when)."""
    import psutil

    rows = []
    for proc in psutil.process_iter(["pid", "ppid", "create_time", "cmdline"]):
        try:
            if proc.environ().get("ROOT") == str(root):
                continue
            pgid = os.getpgid(proc.pid)
        except (psutil.Error, ProcessLookupError):
            continue
        started = time.strftime("%H:%M:%S", time.localtime(proc.info["create_time"]))
        cmdline = " ".join(proc.info["cmdline"] or ()).replace("\n", " ")[:120]
        rows.append((proc.info["create_time"], f"{proc.pid:>7} {proc.info['ppid']:>7} {pgid:>7} {started} {cmdline}"))
    rows.sort(reverse=True)
    return "    pid    ppid    pgid started  command\n" + "\n".join(row for _, row in rows[:limit])


def _api_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/execution/health", timeout=2) as reply:
            return reply.status < 500
    except urllib.error.HTTPError as err:
        return err.code < 500
    except OSError:
        return False


@contextlib.contextmanager
def celery_airflow(
    env: Mapping[str, str], queues: Sequence[str] = QUEUES, concurrency: int = 2, start_timeout_s: float = 240
) -> Iterator[CeleryAirflow]:
    """Migrate the project's DB, start the API server and one Celery worker per queue, yield the deployment,
    and stop every process at the end, whatever happened. `env`: from `tests.airflow_project.airflow_project`."""
    port = free_port()
    deployment = CeleryAirflow(env=celery_env(env, port), workers={q: host_of(q) for q in queues})
    try:
        migrate(deployment.env)
        api = deployment.start(
            "api-server", ["api-server", "--host", "127.0.0.1", "--port", str(port), "--apps", "execution", "-w", "1"]
        )
        for queue, host in deployment.workers.items():
            worker_env = {
                **deployment.env,
                HOSTNAME_ENV: host,
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_hostname",
            }
            args = ["celery", "worker", "--queues", queue, "--celery-hostname", host, "--concurrency", str(concurrency)]
            deployment.start(f"worker-{host}", [*args, "--skip-serve-logs"], env=worker_env)
        _wait_until(lambda: _api_up(port), "airflow api-server", [api], start_timeout_s, deployment.root)
        for service in deployment.services[1:]:
            host = service.name.removeprefix("worker-")
            _wait_until(
                lambda s=service, h=host: f"celery@{h} ready" in s.log.read_text(errors="replace"),
                f"celery worker {host}",
                deployment.services,
                start_timeout_s,
                deployment.root,
            )
        yield deployment
    finally:
        deployment.stop()
