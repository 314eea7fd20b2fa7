"""A sweep's verdict from its cells' work folders, and the end of those folders: removed once the run is over,
unless kept on purpose (SIXNINES_KEEP_WORK) or a cell's teardown did not finish."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_tasks.cell.verdict import KEEP_WORK_ENV, cell_outcomes, discard_cell_work, discard_run_work


def cell(base: Path, group: str, **files: object) -> None:
    (base / group).mkdir(parents=True)
    for name, content in files.items():
        (base / group / f"{name}.json").write_text(json.dumps(content))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    base = tmp_path / "airflow" / "sixnines_x__manual"
    cell(base, "c01", state={}, landed={"status": "ok", "reason": None}, teardown={})
    cell(base, "c02", state={}, landed={"status": "failed", "reason": "broker died"}, teardown={})
    cell(base, "c03", skipped={"selected": ["c01"]})
    cell(base, "c04", failure={"reason": "provision: no such version"})
    (base / "c02" / "brokers").mkdir()
    (base / "c02" / "brokers" / "server.properties").write_text("sasl.jaas.config=...")
    return base


def test_outcomes_name_every_cell(run: Path) -> None:
    assert cell_outcomes(run, ["c01", "c02", "c03", "c04", "c05"]) == {
        "c01": "ok",
        "c02": "failed: broker died",
        "c03": "skipped",
        "c04": "not landed: provision: no such version",
        "c05": "not landed: see the task log of its land task",
    }


def test_the_run_folder_goes_once_every_cell_was_torn_down(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEEP_WORK_ENV, raising=False)
    assert discard_run_work(run).startswith("removed")
    assert not run.exists() and run.parent.exists()


def test_kept_on_purpose(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEP_WORK_ENV, "1")
    assert discard_run_work(run) == f"kept: {KEEP_WORK_ENV} is set"
    assert (run / "c02" / "brokers" / "server.properties").exists()


def test_kept_while_a_teardown_did_not_finish(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a failed teardown left is evidence, and the next provision of that cell still finds it."""
    monkeypatch.delenv(KEEP_WORK_ENV, raising=False)
    (run / "c01" / "teardown.json").unlink()
    assert discard_run_work(run) == "kept: cell c01 was not torn down"
    (run / "c01" / "teardown.json").write_text("{}")
    (run / "clusters").mkdir()
    (run / "clusters" / "abc.json").write_text("{}")
    assert discard_run_work(run) == "kept: cluster abc kept for reuse was not released"
    assert run.exists()


def test_the_cli_discards_each_cell_and_the_run_with_its_last(run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI runs one cell at a time: each torn-down cell's folder goes at once, the run's with the last one;
    a cell whose teardown did not finish stays, as does everything when kept on purpose."""
    monkeypatch.setenv(KEEP_WORK_ENV, "1")
    assert discard_cell_work(run / "c01") == f"kept: {KEEP_WORK_ENV} is set"
    monkeypatch.delenv(KEEP_WORK_ENV)
    (run / "c01" / "teardown.json").unlink()
    assert discard_cell_work(run / "c01") == "kept: cell c01 was not torn down"
    assert discard_cell_work(run / "c02").startswith("removed") and not (run / "c02").exists()
    for group in ("c03", "c04"):
        discard_cell_work(run / group)
    assert run.exists()  # c01 is still there
    (run / "c01" / "teardown.json").write_text("{}")
    discard_cell_work(run / "c01")
    assert not run.exists()
