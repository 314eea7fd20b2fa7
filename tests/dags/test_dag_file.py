"""The one-call DAG file's matrices folder: `SIXNINES_MATRICES`, else the Airflow Variable `sixnines_matrices`,
else `matrices/` under sixnines' home (this checkout here)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_the_environment_then_the_variable_then_the_home_name_the_matrices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sixnines_airflow.runtime import matrices_folder

    monkeypatch.delenv("SIXNINES_MATRICES", raising=False)
    monkeypatch.delenv("AIRFLOW_VAR_SIXNINES_MATRICES", raising=False)
    assert matrices_folder() == REPO / "matrices"
    monkeypatch.setenv("AIRFLOW_VAR_SIXNINES_MATRICES", str(tmp_path / "from-variable"))  # a Variable, as env
    assert matrices_folder() == tmp_path / "from-variable"
    monkeypatch.setenv("SIXNINES_MATRICES", str(tmp_path / "from-env"))
    assert matrices_folder() == tmp_path / "from-env"


def test_a_dag_file_of_one_call_declares_the_folders_dags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.dag_processing.dagbag import DagBag

    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "mine.py").write_text((REPO / "dags" / "sixnines.py").read_text())
    (tmp_path / "matrices").mkdir()
    (tmp_path / "matrices" / "quick.yaml").write_text((REPO / "matrices" / "quick.yaml").read_text())
    monkeypatch.setenv("AIRFLOW_VAR_SIXNINES_MATRICES", str(tmp_path / "matrices"))
    bag = DagBag(dag_folder=str(tmp_path / "dags"))
    assert bag.import_errors == {}
    assert set(bag.dags) == {"sixnines_quick", "sixnines_compare_versions"}
