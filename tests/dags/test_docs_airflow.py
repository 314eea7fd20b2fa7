"""docs/airflow.md's Airflow commands name DAGs that exist and conf their params accept (running them is the
integration tests' job: a backfill needs the scheduler)."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMMANDS = [
    shlex.split(line)
    for block in re.findall(r"```sh\n(.*?)```", (REPO / "docs" / "airflow.md").read_text(), flags=re.S)
    for line in block.splitlines()
    if line.startswith("tools/airflow ")
]


def test_readme_documents_backfill_and_compare() -> None:
    assert any(c[1:3] == ["backfill", "create"] for c in COMMANDS)
    assert any(c[1:3] == ["dags", "test"] and c[3] == "sixnines_compare_versions" for c in COMMANDS)


def test_readme_airflow_commands_fit_the_dags(dagbag: Any) -> None:
    import json

    for command in COMMANDS:
        if command[1:3] == ["backfill", "create"]:
            assert command[command.index("--dag-id") + 1] in dagbag.dags
            assert "--max-active-runs" in command  # benchmarks never overlap
        elif command[1:3] == ["dags", "test"]:
            dag = dagbag.dags[command[3]]
            params = copy.deepcopy(dag.params)
            for key, value in json.loads(command[command.index("-c") + 1]).items():
                params[key] = value  # validates against the Param's schema
            params.validate()
