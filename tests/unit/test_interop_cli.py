"""`sixnines import` and `sixnines export` name where they write the same way: `-o` or `--out` on every command
(`import omb` also reads `--output`, its older name)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from bench_tasks.cli import app
from bench_tasks.lake.layout import Lake, RunInfo

OMB = Path(__file__).parents[1] / "data" / "omb"
WORKLOAD = str(OMB / "workloads" / "1-topic-1-partition-1kb.yaml")
DRIVER = str(OMB / "drivers" / "driver-kafka" / "kafka-latency.yaml")


@pytest.mark.parametrize("flag", ["-o", "--out", "--output"])
def test_import_omb_writes_the_matrix_where_each_flag_says(flag: str, tmp_path: Path) -> None:
    target = tmp_path / "matrix.yaml"
    done = CliRunner().invoke(app, ["import", "omb", WORKLOAD, "--driver", DRIVER, flag, str(target)])
    assert done.exit_code == 0, done.output
    printed = CliRunner().invoke(app, ["import", "omb", WORKLOAD, "--driver", DRIVER])
    assert target.read_text() == printed.stdout  # the same matrix a run without the flag prints


def a_run_without_cells(tmp_path: Path) -> tuple[Path, str]:
    """A lake holding one run that has started and landed no cell yet: an export of it is its EXPORT.md alone."""
    lake, run = Lake(tmp_path / "lake"), RunInfo.new()
    Path(str(lake.run_dir(run))).mkdir(parents=True)
    return tmp_path / "lake", run.run_id


@pytest.mark.parametrize("kind", ["omb", "hgrm"])
@pytest.mark.parametrize("flag", ["-o", "--out"])
def test_export_writes_to_the_folder_each_flag_names(kind: str, flag: str, tmp_path: Path) -> None:
    lake, run_id = a_run_without_cells(tmp_path)
    target = tmp_path / "exported"
    done = CliRunner().invoke(app, ["export", kind, run_id, "--lake", str(lake), flag, str(target)])
    assert done.exit_code == 0, done.output
    assert (target / "EXPORT.md").read_text().strip()
    assert not (lake / "exports").exists()  # written where the flag said, not into the lake
