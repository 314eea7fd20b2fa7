"""A real Spark standalone cluster on loopback for tests: one master and N workers from the pyspark wheel.

The jobs are meant to run unchanged on any cluster (DESIGN: "Spark runs on a cluster"); the only honest check
is to start one. `spark-class` from the pyspark distribution execs the JVM in place, so the PID we start is
the master's or worker's own; executors the worker launched are its children. Everything runs under one
folder (work, local and log dirs), binds 127.0.0.1 on free ports, and is stopped by PID at the end — the
executors first if any are left — so a test leaves no JVM behind.

    with standalone_cluster(tmp_path / "spark") as cluster:
        ...  # submit to cluster.master_url; cluster.state() is the master's JSON status
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pyspark

from bench_tasks.brokers.ports import free_ports
from spark_jobs.launch import driver_archive_flags

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(RuntimeError):
    """The cluster did not come up (the message carries the tail of the process's log)."""


@dataclass
class SparkDaemon:
    """One master or worker JVM we started, with its log file."""

    name: str
    popen: subprocess.Popen
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (the worker's shutdown hook kills its executors), then SIGKILL; then any child left."""
        try:
            children = psutil.Process(self.popen.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            children = []
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        for child in children:
            try:
                child.terminate()
                child.wait(timeout=grace_s)
            except psutil.TimeoutExpired:
                child.kill()
            except psutil.NoSuchProcess:
                pass


@dataclass
class StandaloneCluster:
    """A running master and its workers: where to submit (`master_url`) and where to look (`ui_url`)."""

    master_url: str
    ui_url: str
    root: Path
    daemons: list[SparkDaemon] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        """The master's status as its web UI serves it at /json/: workers, active and completed applications."""
        with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=10) as response:
            return json.load(response)

    def state_while_starting(self) -> dict[str, Any]:
        """`state()`, or {} while the UI is still attaching its pages. Its server accepts before every handler
        is in, and for that moment the HTML page at "/" answers "/json/" too (seen in a CI run, and here with
        the host busy: once in four starts)."""
        try:
            return self.state()
        except json.JSONDecodeError:
            return {}

    @property
    def work_dirs(self) -> list[Path]:
        """Each worker's work dir: one `app-*/<executor id>/` folder (stdout, stderr) per executor it ran."""
        return sorted(self.root.glob("worker-*/work"))


def _spark_class() -> str:
    found = shutil.which("spark-class")
    if not found:
        raise SparkClusterError("no `spark-class` on PATH: put the venv's bin (pyspark installs it) first on PATH")
    return found


def _start(name: str, argv: list[str], root: Path, env: dict[str, str]) -> SparkDaemon:
    log_path = root / "logs" / f"{name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    return SparkDaemon(name, popen, log_path)


def _wait(what: str, daemon: SparkDaemon, ready: Any, timeout_s: float) -> None:
    """Poll `ready()` until true; fail early with the daemon's log if it died, or at the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.popen.poll() is not None:
            raise SparkClusterError(f"{daemon.name} exited ({daemon.popen.returncode}):\n{daemon.log_tail()}")
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SparkClusterError(f"{what} not ready after {timeout_s:.0f} s:\n{daemon.log_tail()}")


def _conf_dir(root: Path) -> Path:
    """The daemons' SPARK_CONF_DIR, empty so that no spark-defaults.conf from elsewhere leaks in: pyspark's own
    `conf` (the wheel ships none), which is also the classpath the driver's class-data archive was made with, so
    the master, workers and executors map it too (a JVM maps an archive only on the classpath it was made on);
    a folder of our own if pyspark's holds files."""
    own = Path(pyspark.__file__).parent / "conf"
    if not own.exists() or not any(own.iterdir()):
        return own
    private = root / "conf"
    private.mkdir(exist_ok=True)
    return private


def _follow_bound_ports(cluster: StandaloneCluster, master: SparkDaemon, timeout_s: float) -> None:
    """Point the cluster at the ports the master bound, as its log states them. Spark takes the next port when
    the one asked for is taken, and another test's process can take a port between free_ports releasing it and
    the master's JVM binding it (seen in two workers: the master's UI port served another Spark UI's page)."""
    bound: dict[str, int] = {}

    def logged() -> bool:
        text = master.log_path.read_text(errors="replace") if master.log_path.exists() else ""
        for service in ("sparkMaster", "MasterUI"):
            found = re.search(rf"Successfully started service '{service}' on port (\d+)", text)
            if found:
                bound[service] = int(found.group(1))
        return len(bound) == 2

    _wait("the master's ports", master, logged, timeout_s)
    cluster.master_url = f"spark://{HOST}:{bound['sparkMaster']}"
    cluster.ui_url = f"http://{HOST}:{bound['MasterUI']}"


@contextmanager
def standalone_cluster(
    root: Path, workers: int = 1, cores: int = 2, memory: str = "1g", start_timeout_s: float = 120.0
) -> Iterator[StandaloneCluster]:
    """Start a master, then `workers` workers (`cores` and `memory` each), wait until every worker is ALIVE
    in the master's status, yield the cluster, and stop the workers then the master, always."""
    root.mkdir(parents=True, exist_ok=True)
    spark_class = _spark_class()
    port, ui_port = free_ports(2)
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_DIRS": str(root / "local"),
        "SPARK_CONF_DIR": str(_conf_dir(root)),
        "SPARK_LOG_DIR": str(root / "logs"),
        # the master and workers load the driver's jars: its class-data archive (when made) starts them faster
        "SPARK_DAEMON_JAVA_OPTS": " ".join(driver_archive_flags()),
    }
    cluster = StandaloneCluster(f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}", root)
    try:
        master = _start(
            "master",
            [spark_class, MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(ui_port)],
            root,
            env,
        )
        cluster.daemons.append(master)
        _follow_bound_ports(cluster, master, start_timeout_s)
        _wait("master", master, lambda: cluster.state_while_starting().get("status") == "ALIVE", start_timeout_s)
        for index in range(workers):
            worker_port, worker_ui = free_ports(2)
            work_dir = root / f"worker-{index}" / "work"
            work_dir.mkdir(parents=True, exist_ok=True)
            worker = _start(
                f"worker-{index}",
                [
                    spark_class,
                    WORKER_CLASS,
                    cluster.master_url,
                    "--host",
                    HOST,
                    "--port",
                    str(worker_port),
                    "--webui-port",
                    str(worker_ui),
                    "--cores",
                    str(cores),
                    "--memory",
                    memory,
                    "--work-dir",
                    str(work_dir),
                ],
                root,
                env,
            )
            cluster.daemons.append(worker)
        for worker in cluster.daemons[1:]:
            _wait(
                f"{workers} worker(s)",
                worker,
                lambda: sum(w.get("state") == "ALIVE" for w in cluster.state().get("workers", [])) >= workers,
                start_timeout_s,
            )
        yield cluster
    finally:
        for daemon in reversed(cluster.daemons):  # workers (and their executors) first, then the master
            daemon.stop()
