"""Airflow for the DAG tests: a throwaway AIRFLOW_HOME, this checkout's DAGs and plugins, no examples.

The environment is set when this file is imported, before anything imports Airflow (its configuration is
read once, at import). One session-scoped DagBag serves every integrity test (STYLE 10).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="sixnines-airflow-home-")
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(REPO / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# Beside the cell part (`make test`) these tests run at idle priority, and parsing the DAG files took over Airflow's
# default 30 s there once (an empty DagBag, "Process timed out"): a parse is no timing, so it may take its time.
os.environ["AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT"] = "300"


@pytest.fixture(scope="session")
def dagbag() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(REPO / "dags"))
