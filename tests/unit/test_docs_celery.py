"""docs/airflow.md's Celery-on-one-machine block says what the executor test (tests/airflow_celery.py) really runs:
the same settings, the same worker per queue and host name, `dags test --use-executor`."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from tests.airflow_celery import QUEUES, celery_env, host_of

REPO = Path(__file__).resolve().parents[2]


def _block() -> list[str]:
    text = (REPO / "docs" / "airflow.md").read_text()
    (block,) = [b for b in re.findall(r"```sh\n(.*?)```", text, re.S) if "Celery" in b]
    return block.splitlines()


def test_readme_celery_settings_are_the_harness_settings(tmp_path: Path) -> None:
    exports = dict(line.removeprefix("export ").split("=", 1) for line in _block() if line.startswith("export "))
    env = celery_env({"ROOT": str(tmp_path), "AIRFLOW_HOME": str(tmp_path / ".airflow")}, 8080)
    harness = {k: v for k, v in env.items() if k.startswith("AIRFLOW__")}
    assert set(exports) == set(harness)
    for name, value in harness.items():
        shown = exports[name].strip('"').replace("$PWD", str(tmp_path))
        if name != "AIRFLOW__API_AUTH__JWT_SECRET":  # a fresh random secret on both sides
            assert shown == value, name


def test_readme_starts_one_worker_per_queue_and_runs_through_the_executor() -> None:
    commands = [shlex.split(line.rstrip("&")) for line in _block() if line.startswith("tools/airflow ")]
    workers = {c[c.index("--queues") + 1]: c[c.index("--celery-hostname") + 1] for c in commands if "worker" in c}
    assert workers == {q: host_of(q) for q in QUEUES}
    assert all("--skip-serve-logs" in c for c in commands if "worker" in c)
    (api,) = [c for c in commands if c[1] == "api-server"]
    assert api[api.index("--apps") + 1] == "execution"
    (run,) = [c for c in commands if c[1:3] == ["dags", "test"]]
    assert "--use-executor" in run
