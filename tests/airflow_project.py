"""A throw-away Airflow project for tests that run the sweep DAG for real: a folder with this checkout's DAG
files, the test's own matrices, a SQLite Airflow home and a lake, and the environment every Airflow process
of the test gets. One place for what `tests/integration/test_airflow_sweep.py`, `tests/s3/test_airflow_s3.py`
and the Celery executor harness (`tests/airflow_celery.py`) all need, so they cannot drift apart.

The environment starts from the test's own with every `AIRFLOW*` variable dropped (a developer's or
`tests/dags`' Airflow home must not leak in), then sets what `tools/airflow` sets for a checkout."""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from bench_tasks.cell.hostlease import HOST_LEASE_ENV, lease_path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SWEEP_DAG_FILES = ("sixnines.py",)
POOL = "sixnines_bench"


def airflow_project(
    root: Path,
    matrices: Mapping[str, str],
    *,
    dag_files: Sequence[str] = SWEEP_DAG_FILES,
    lake: str | None = None,
    cache: str | None = None,
    spark_master: str = "local[*]",
    drop_prefixes: Iterable[str] = (),
    extra_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Lay out `root` (dags/, matrices/ with `matrices` as `<name>.yaml`) and return the environment of its
    Airflow processes. `lake` defaults to `root/lake`, `cache` to `root/cache`; `drop_prefixes` removes more
    inherited variables (e.g. `AWS_` when credentials must come from a connection only). Whatever the cache, the
    project's cells take the suite's host lease (`SIXNINES_HOST_LEASE`): in the cell part they take turns with
    the other workers' cells instead of starving them."""
    (root / "dags").mkdir(parents=True, exist_ok=True)
    (root / "matrices").mkdir(exist_ok=True)
    for name in dag_files:
        shutil.copy(REPO / "dags" / name, root / "dags")
    for name, text in matrices.items():
        (root / "matrices" / f"{name}.yaml").write_text(text)
    dropped = ("AIRFLOW", *drop_prefixes)
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(dropped)},
        "AIRFLOW_HOME": str(root / "airflow-home"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": f'{{"conn_type": "spark", "host": "{spark_master}"}}',  # as tools/airflow
        "SIXNINES_MATRICES": str(root / "matrices"),
        "SIXNINES_LAKE": lake or str(root / "lake"),
        "SIXNINES_CACHE": cache or str(root / "cache"),
        HOST_LEASE_ENV: str(lease_path()),
        "PATH": f"{BIN}:{os.environ['PATH']}",  # Airflow's subprocesses and spark-submit need the venv
        "ROOT": str(root),
        **(extra_env or {}),
    }


def airflow(
    env: Mapping[str, str], *args: str, timeout: float = 300, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the Airflow CLI of this venv in the project's environment (output captured, never raises on exit)."""
    return subprocess.run(
        [str(BIN / "airflow"), *args],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or env.get("ROOT"),
    )


def migrate(env: Mapping[str, str]) -> None:
    """The project's SQLite metadata DB with the one-slot pool every benchmark task runs in, as `make bench` makes
    it: a copy of one made by `airflow db migrate` and `airflow pools set` once per installed Airflow (8 s of CLI
    each time, four projects a suite). A migrated DB holds nothing of the project: the schema, the default log
    templates and the pools."""
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_migrated_db(env), home / "airflow.db")


def _migrated_db(env: Mapping[str, str]) -> Path:
    """The cached migrated DB for this venv's Airflow distributions (`$SIXNINES_CACHE/airflow-db/<key>/`), made
    under a file lock the first time (parallel test workers wait for one another)."""
    installed = sorted(
        f"{d.metadata['Name']}=={d.version}"
        for d in importlib.metadata.distributions()
        if (d.metadata["Name"] or "").lower().startswith("apache-airflow")
    )
    key = hashlib.sha256("\n".join([POOL, *installed]).encode()).hexdigest()[:16]
    folder = Path(os.environ.get("SIXNINES_CACHE", REPO / ".cache")) / "airflow-db" / key
    folder.mkdir(parents=True, exist_ok=True)
    template = folder / "airflow.db"
    with (folder / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            build = Path(tempfile.mkdtemp(prefix="home-", dir=folder))
            built = {**env, "AIRFLOW_HOME": str(build)}
            for cmd in (["db", "migrate"], ["pools", "set", POOL, "1", "one benchmark at a time (test)"]):
                done = airflow(built, *cmd)
                assert done.returncode == 0, f"airflow {' '.join(cmd)}: " + done.stdout[-2000:] + done.stderr[-2000:]
            (build / "airflow.db").rename(template)
            shutil.rmtree(build, ignore_errors=True)
    return template
