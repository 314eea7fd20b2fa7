"""The `sixnines` CLI as a user runs it: a real subprocess, real brokers, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.usefixtures("no_orphans")

TINY_MATRIX = """\
name: tiny
systems:
  - system: nats
    versions: [latest]
    axes:
      broker.mode: [core, jetstream]
workload:
  message_size_bytes: 128
  rate_per_s: 200
  warmup_s: 0.5
  measure_s: 1
  cooldown_s: 0.5
  drain_timeout_s: 2
measurements: [e2e]
"""


def sixnines(*args: str, env_cache: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:

    env = dict(os.environ)
    if env_cache is not None:
        env["SIXNINES_CACHE"] = str(env_cache)
    return subprocess.run(
        [sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_run_json_and_only(tmp_path: Path) -> None:
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text(TINY_MATRIX)
    listed = sixnines("cells", str(matrix), "--json")
    assert listed.returncode == 0, listed.stderr
    cells = json.loads(listed.stdout)
    assert len(cells) == 2
    jetstream = next(c["cell_id"] for c in cells if c["spec"]["broker"]["mode"] == "jetstream")

    done = sixnines("run", str(matrix), "--lake", str(tmp_path / "lake"), "--only", jetstream, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # progress goes to stderr, so stdout is pure JSON
    (cell,) = result["cells"]
    assert cell["cell_id"] == jetstream and cell["status"] == "ok"
    e2e = cell["percentiles_ms"]["e2e"]["intended"]
    assert e2e["count"] == 200
    assert e2e["99.9"] is None and e2e["max"] > 0  # unsupported is null, never a number
    assert cell["accounting"]["lost"] == 0
    assert Path(cell["path"], "sent-p0.parquet").exists()


def test_run_phase_scale_scales_every_phase_of_the_cells_named(tmp_path: Path) -> None:
    """`--only` names a cell as `cells` lists it; `--phase-scale` then scales its phases, as Airflow's
    `phase_scale` param does: 2 × (0.5 + 1 + 0.5) s at 200/s, landed under the scaled cell's own id."""
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text(TINY_MATRIX)
    cells = json.loads(sixnines("cells", str(matrix), "--json").stdout)
    core = next(c["cell_id"] for c in cells if c["spec"]["broker"]["mode"] == "core")

    done = sixnines(
        "run", str(matrix), "--lake", str(tmp_path / "lake"), "--only", core, "--phase-scale", "2", "--json"
    )
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["status"] == "ok" and cell["cell_id"] != core
    assert cell["percentiles_ms"]["e2e"]["intended"]["count"] == 400
    workload = cell["spec"]["workload"]
    assert (workload["warmup_s"], workload["measure_s"], workload["cooldown_s"]) == (1.0, 2.0, 1.0)


def test_run_table_output_then_report(tmp_path: Path) -> None:
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text(TINY_MATRIX.replace("[core, jetstream]", "[core]"))
    done = sixnines("run", str(matrix), "--lake", str(tmp_path / "lake"), "--report")
    assert done.returncode == 0, done.stderr
    for text in ("e2e resp", "e2e svc", "send lag", "p99.9999", "unsup.", "lost 0", "published "):
        assert text in done.stdout
    report = Path(done.stdout.split("report: ")[-1].split()[0])  # `run --report` ends with the report's path
    assert report.name == "report.html" and "<html" in report.read_text()[:200].lower()
    listed = sixnines("runs", "--lake", str(tmp_path / "lake"))
    assert str(report) in listed.stdout and " tiny " in listed.stdout


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
def test_unknown_cell_is_a_clear_error(tmp_path: Path) -> None:
    matrix = tmp_path / "tiny.yaml"
    matrix.write_text(TINY_MATRIX)
    done = sixnines("run", str(matrix), "--lake", str(tmp_path / "lake"), "--only", "nosuchcell")
    assert done.returncode == 1
    assert "nosuchcell" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
def test_brokers_up_status_down(tmp_path: Path) -> None:
    up = sixnines("brokers", "up", "nats", "--mode", "jetstream", env_cache=tmp_path)
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "brokers" / "nats.json").read_text())
    (pid,) = state["nodes"].values()
    try:
        assert psutil.pid_exists(pid)
        assert state["address"] in up.stdout and state["kind"] == "provisioned"
        status = sixnines("brokers", "status", "nats", env_cache=tmp_path)
        assert status.returncode == 0 and "up" in status.stdout
        again = sixnines("brokers", "up", "nats", env_cache=tmp_path)
        assert again.returncode == 1 and "already up" in again.stderr
    finally:
        down = sixnines("brokers", "down", "nats", env_cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert sixnines("brokers", "status", "nats", env_cache=tmp_path).returncode == 3


def test_other_release_is_fetched_and_run(tmp_path: Path) -> None:
    """Versions side by side: a release other than the bundled one is fetched into the cache and used."""
    matrix = tmp_path / "old.yaml"
    matrix.write_text(TINY_MATRIX.replace("[latest]", "['2.10.26']").replace("[core, jetstream]", "[core]"))
    done = sixnines("run", str(matrix), "--lake", str(tmp_path / "lake"), "--json")
    assert done.returncode == 0, done.stderr
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["spec"]["version"] == "2.10.26"
    result = json.loads(Path(cell["path"], "result.json").read_text())
    assert result["context"]["broker"]["version"] == "2.10.26"  # as reported by the server itself


def test_failed_cell_exits_nonzero_and_still_lands(tmp_path: Path) -> None:
    matrix = tmp_path / "strict.yaml"
    strict = TINY_MATRIX.replace("[core, jetstream]", "[core]").replace(
        "drain_timeout_s: 2", "drain_timeout_s: 2\n  max_schedule_lag_ms: 0.000001"
    )
    matrix.write_text(strict)
    done = sixnines("run", str(matrix), "--lake", str(tmp_path / "lake"), "--json")
    assert done.returncode == 1
    (cell,) = json.loads(done.stdout)["cells"]
    assert cell["status"] == "failed"
    assert "generator fell behind its schedule" in cell["reason"]
    assert Path(cell["path"], "sent-p0.parquet").exists()  # nothing lost when a cell fails
    assert "1 of 1 cell(s) failed" in done.stderr


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
def test_kafka_brokers_up_status_down(tmp_path: Path) -> None:

    # Broker state goes to a private cache; the fetched Kafka releases are shared so nothing is fetched twice.
    fetched = Path(os.environ.get("SIXNINES_CACHE", ".cache")) / "kafka"
    if fetched.exists():
        (tmp_path / "kafka").symlink_to(fetched.resolve(), target_is_directory=True)
    up = sixnines("brokers", "up", "kafka", "--brokers", "1", env_cache=tmp_path)
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "brokers" / "kafka.json").read_text())
    pids = list(state["nodes"].values())
    try:
        status = sixnines("brokers", "status", "kafka", env_cache=tmp_path)
        assert status.returncode == 0 and "nodes alive 1/1" in status.stdout
    finally:
        down = sixnines("brokers", "down", "kafka", env_cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert sixnines("brokers", "status", "kafka", env_cache=tmp_path).returncode == 3


@pytest.mark.alongside  # runs no cell (brokers only): in the parallel part
def test_nats_cluster_brokers_up_status_down(tmp_path: Path) -> None:
    refused = sixnines("brokers", "up", "nats", "--servers", "3", env_cache=tmp_path)
    assert refused.returncode == 1 and "need mode 'jetstream'" in refused.stderr and "Traceback" not in refused.stderr
    up = sixnines("brokers", "up", "nats", "--mode", "jetstream", "--servers", "3", env_cache=tmp_path)
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "brokers" / "nats.json").read_text())
    pids = list(state["nodes"].values())
    try:
        assert len(set(pids)) == 3 and all(psutil.pid_exists(pid) for pid in pids)
        assert state["address"].count("nats://") == 3 and "cluster sixnines" in up.stdout
        status = sixnines("brokers", "status", "nats", env_cache=tmp_path)
        assert status.returncode == 0 and "nodes alive 3/3" in status.stdout and "meta leader n" in status.stdout
    finally:
        down = sixnines("brokers", "down", "nats", env_cache=tmp_path)
    assert down.returncode == 0, down.stderr
    assert sorted(pids) == sorted(int(p) for p in down.stdout.split("[")[1].split("]")[0].split(","))
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE for pid in pids)
    assert sixnines("brokers", "status", "nats", env_cache=tmp_path).returncode == 3


def test_a_killed_run_takes_its_workers_and_brokers_along(tmp_path: Path) -> None:
    """SIGKILL the CLI mid-cell: nothing can tell its workers to stop, so each must notice its owner is gone and
    end by itself (a forked worker's parent is the fork server, not the CLI), and its broker with it."""
    matrix = tmp_path / "long.yaml"
    matrix.write_text(TINY_MATRIX.replace("measure_s: 1", "measure_s: 30").replace(", jetstream", ""))
    run = subprocess.Popen(
        [sys.executable, "-m", "bench_tasks", "run", str(matrix), "--lake", str(tmp_path / "lake")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    cli = psutil.Process(run.pid)
    try:
        workers = _workers_of(cli, deadline=time.monotonic() + 240)
        brokers = [p for p in cli.children(recursive=True) if p.name() == "nats-server"]
    finally:
        run.kill()
        run.wait(10)
    gone, alive = psutil.wait_procs([*workers, *brokers], timeout=10)
    running = [p for p in alive if not _ended(p)]
    assert running == [], f"outlived their run: {[(p.pid, _title(p)) for p in running]}"
    assert brokers and len(gone) + len(alive) == 2 + len(brokers)


def _workers_of(cli: psutil.Process, deadline: float) -> list[psutil.Process]:
    """The producer and consumer of the run's cell, once both are running (the run may wait for the host)."""
    roles = ("sixnines producer", "sixnines consumer")
    while time.monotonic() < deadline:
        workers = [p for p in cli.children(recursive=True) if _title(p).startswith(roles)]
        if len(workers) == 2:
            return workers
        time.sleep(0.2)
    raise AssertionError("the cell's workers never started")


def _ended(proc: psutil.Process) -> bool:
    """Exited, though perhaps not yet reaped: a zombie whose parent (the fork server, gone with its run) left it to
    an init that reaps late still has a PID, and wait_procs counts it alive (the CI run failed on one)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _title(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except psutil.Error:
        return ""
