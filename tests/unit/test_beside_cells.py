"""The cell part's scheduler (tests/beside_cells.py) in a real pytest-xdist session of a small project: the
listed files run on the last worker only, which knows it is that worker, and every other file on the others until
that worker's files are dealt; and the suite's own list names cell-part files."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFTEST = """
from tests import beside_cells

def pytest_addoption(parser):
    beside_cells.add_option(parser)

pytest_xdist_make_scheduler = beside_cells.make_scheduler
"""
TEST = """
import os
from pathlib import Path
from tests.beside_cells import is_beside_worker

def test_{n}(request):
    beside = "+beside" if is_beside_worker(request.config) else ""
    Path("ran_{name}_{n}").write_text(os.environ["PYTEST_XDIST_WORKER"] + beside)
"""


def _project(root: Path, files: dict[str, int]) -> None:
    (root / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\nbeside_cells =\n    test_slow_a.py\n    test_slow_b.py\n")
    for name, count in files.items():
        (root / f"test_{name}.py").write_text("".join(TEST.format(n=n, name=name) for n in range(count)))


def _workers(root: Path, *options: str) -> dict[str, set[str]]:
    """Run the project; for each file, the workers its tests ran on."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ran: dict[str, set[str]] = {}
    for mark in root.glob("ran_*"):
        ran.setdefault(mark.name.removeprefix("ran_").rsplit("_", 1)[0], set()).add(mark.read_text())
    return ran


def test_the_listed_files_run_on_the_last_worker_only(tmp_path: Path) -> None:
    _project(tmp_path, {"slow_a": 2, "slow_b": 2, "cell_a": 3, "cell_b": 3, "cell_c": 3, "cell_d": 3})
    ran = _workers(tmp_path, "-n", "3", "--dist", "loadfile", "--beside-cells")
    assert len(ran) == 6
    assert ran["slow_a"] | ran["slow_b"] == {"gw2+beside"}, ran  # and the worker knows it is the beside worker


def test_two_beside_workers_share_the_listed_files(tmp_path: Path) -> None:
    _project(tmp_path, {"slow_a": 2, "slow_b": 2, "cell_a": 3, "cell_b": 3, "cell_c": 3, "cell_d": 3})
    ran = _workers(tmp_path, "-n", "4", "--dist", "loadfile", "--beside-cells=2")
    assert len(ran) == 6
    assert ran["slow_a"] | ran["slow_b"] <= {"gw2+beside", "gw3+beside"}, ran


def test_a_beside_worker_whose_files_are_dealt_takes_the_others(tmp_path: Path) -> None:
    """The listed file is quick and the other files are not (their tests sleep): the beside worker, done first,
    runs some of them too."""
    _project(tmp_path, {"slow_a": 1, **{f"cell_{x}": 1 for x in "abcdefgh"}})
    for x in "abcdefgh":
        test = tmp_path / f"test_cell_{x}.py"
        test.write_text(test.read_text().replace("def test_0(request):", "def test_0(request):\n    time.sleep(0.5)"))
        test.write_text("import time\n" + test.read_text())
    ran = _workers(tmp_path, "-n", "3", "--dist", "loadfile", "--beside-cells")
    assert ran["slow_a"] == {"gw2+beside"}, ran
    assert any(ran[f"cell_{x}"] == {"gw2+beside"} for x in "abcdefgh"), ran


def test_with_one_worker_xdist_deals_every_file(tmp_path: Path) -> None:
    _project(tmp_path, {"slow_a": 1, "cell_a": 1})
    assert set(_workers(tmp_path, "-n", "1", "--dist", "loadfile", "--beside-cells")) == {"slow_a", "cell_a"}


def test_with_fewer_files_than_workers_every_file_runs(tmp_path: Path) -> None:
    """xdist stops the workers it has no file for, the last to have collected first: when that is the beside
    worker, its file runs on another (which one xdist stops depends on the order they finished collecting)."""
    _project(tmp_path, {"slow_a": 1, "cell_a": 1})
    ran = _workers(tmp_path, "-n", "3", "--dist", "loadfile", "--beside-cells")
    assert set(ran) == {"slow_a", "cell_a"}, ran


def test_the_suites_list_names_cell_part_files() -> None:
    """Each file exists and belongs to the cell part (`serial`: under tests/integration or marked integration, as
    tests/conftest.py marks them; not `alongside` or `host_alone`)."""
    listed = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["beside_cells"]
    assert listed
    for name in listed:
        text = (REPO / name).read_text()
        serial = name.startswith("tests/integration/") or "pytest.mark.integration" in text
        assert serial and "alongside" not in text and "host_alone" not in text, name
