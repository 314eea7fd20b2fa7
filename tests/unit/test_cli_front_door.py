"""The CLI as a new user meets it: every bad invocation is one clear message and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench_tasks.lake.layout import Lake, RunInfo
from bench_tasks.lake.runs import RunNotFound, list_runs, report_path, resolve_run_id

MULTI_PROBLEM = """\
name: Bad Name
colour: blue
systems:
  - system: nats
    versions: ["9.9.9"]
  - system: kafka
    versions: [latest]
    broker: {partitions: 0}
workload:
  message_size_bytes: 10
  rate_per_s: -5
  measure_s: 1
measurements: [e2e, bogus]
exclude:
  - {broker.mode: core}
"""


def sixnines(*args: str, lake: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "SIXNINES_LAKE"}
    if lake is not None:
        env["SIXNINES_LAKE"] = str(lake)
    return subprocess.run([sys.executable, "-m", "bench_tasks", *args], capture_output=True, text=True, env=env)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "Usage: sixnines"),
        (("run",), "Missing argument 'MATRIX'"),
        (("bogus",), "No such command 'bogus'"),
        (("calibrate", "--rate", "abc"), "Invalid value for '--rate'"),
        (("report",), "give a RUN_ID (see `sixnines runs`) or --latest"),
        (("report", "nosuchrun"), "no run 'nosuchrun' in the lake"),
        (("analyze", "--latest"), "--latest: the lake"),
        (("report", "r1", "--latest"), "give RUN_ID (r1) or --latest, not both"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_usage_errors_exit_2_with_one_clear_message(args: tuple[str, ...], says: str, tmp_path: Path) -> None:
    done = sixnines(*args, lake=tmp_path / "empty-lake")
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert says in " ".join(output.split()), output  # rich may wrap a long message
    assert "Traceback" not in output


def test_help_and_version_exit_0() -> None:
    for flag in ("-h", "--help"):
        done = sixnines(flag)
        assert done.returncode == 0 and "Commands" in done.stdout and "Exit codes" in done.stdout
    version = sixnines("--version")
    assert version.returncode == 0 and version.stdout.startswith("sixnines ")


def test_unreadable_matrix_paths_are_named(tmp_path: Path) -> None:
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes("name: caf\xe9\n".encode("latin-1"))
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: x\nsystems:\n  - system: nats\n    versions: [latest\nworkload: {a: 1}\n")
    cases = {
        tmp_path: "is a folder",
        binary: "not UTF-8 text (byte 0xe9 at offset 9)",
        broken: "not valid YAML: line 5, column 9",
        tmp_path / "absent.yaml": "file not found",
    }
    for path, says in cases.items():
        done = sixnines("cells", str(path))
        assert done.returncode == 2, done.stderr
        assert f"error: {path}: invalid matrix" in done.stderr and says in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


def test_every_independent_problem_of_a_file_in_one_run(tmp_path: Path) -> None:
    bad = tmp_path / "multi.yaml"
    bad.write_text(MULTI_PROBLEM)
    done = sixnines("cells", str(bad))
    assert done.returncode == 2
    text = " ".join(done.stderr.split())
    for problem in (
        "name: 'Bad Name'",
        "colour: 'blue' — unknown key",
        "measurements[1]: 'bogus'",
        "systems[0].versions[0]: '9.9.9' — unknown nats version",
        "workload.rate_per_s: -5",
        "workload.message_size_bytes: 10",
        "systems[1].broker.partitions: 0",
        "exclude[0].broker.mode: not an axis",
    ):
        assert problem in text, f"{problem!r} missing from: {done.stderr}"
    assert text.count("workload.rate_per_s") == 1  # shared by both blocks, reported once


def test_cells_prints_a_header_count_and_wall_time() -> None:
    done = sixnines("cells", "matrices/quick.yaml")
    assert done.returncode == 0, done.stderr
    header, columns, *rows = done.stdout.splitlines()
    assert header.startswith("matrix quick: 5 cell(s) (7 runs with repeats), about ") and "min of wall time" in header
    assert columns.split() == ["cell", "id", "series", "key", "label"]
    assert len(rows) == 5


def _landed(lake: Lake, run_id: str, started: str, statuses: list[str]) -> RunInfo:
    run = RunInfo(run_id=run_id, run_date=started[:10])
    for index, status in enumerate(statuses):
        row = {"run_id": run_id, "run_date": run.run_date, "matrix": "quick", "cell_id": f"c{index}"}
        lake.upsert_cell_row(run, {**row, "status": status, "started_at": started})
    return run


def test_runs_lists_newest_first_with_counts_and_report(tmp_path: Path) -> None:
    lake = Lake(tmp_path)
    old = _landed(lake, "older", "2026-11-01T10:00:00+00:00", ["ok", "failed"])
    _landed(lake, "newer", "2026-11-02T10:00:00+00:00", ["ok"])
    path = report_path(tmp_path, old.run_date, old.run_id)
    path.parent.mkdir(parents=True)
    path.write_text("<html></html>")
    newer, older = list_runs(tmp_path)
    assert (newer.run_id, newer.ok, newer.failed, newer.report) == ("newer", 1, 0, None)
    assert (older.run_id, older.run_date, older.ok, older.failed, older.report) == ("older", "2026-11-01", 1, 1, path)
    assert resolve_run_id(tmp_path, None, latest=True) == "newer"
    with pytest.raises(RunNotFound, match="newest runs: newer, older"):
        resolve_run_id(tmp_path, "nope", latest=False)

    listed = sixnines("runs", lake=tmp_path)  # the lake from SIXNINES_LAKE, as Airflow's tasks find it
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines.index(next(x for x in lines if "newer" in x)) < lines.index(next(x for x in lines if "older" in x))
    assert "report.html" in listed.stdout
