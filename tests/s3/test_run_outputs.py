"""A run's analysis outputs — published tables, quarantine, regression results — commit as whole folders, on a
local lake (rename into place) and on S3 (moto's server: an attempt, then its `_committed.json` marker).

Each test runs against both lakes with the real writers (`spark_jobs.publish`, `bench_tasks.regressions`) and
the real readers (the report's `load_run`, `committed_run_file` as the notifier reads it). A crashed writer is
reproduced by the state it leaves behind: on S3 an `attempt=…` folder with some of its files and no marker,
locally a hidden staging folder; both must stay invisible, and a retry must replace everything before it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from bench_tasks.lake.layout import (
    PUBLISHED_AREA,
    QUARANTINE_AREA,
    REGRESSIONS_AREA,
    Lake,
    RunInfo,
    committed_run_file,
    history_file,
    run_output_dir,
)
from bench_tasks.lake.storage import (
    COMMIT_MARKER,
    LakePath,
    S3Path,
    committed_folder,
    local_staging,
    new_attempt,
    read_parquet,
    write_folder,
)
from bench_tasks.regressions import Settings, analyse, write_results
from bench_tasks.report.data import load_run
from spark_jobs.lakeio import RunRef
from spark_jobs.publish import publish, quarantine
from tests.s3.conftest import keys
from tests.unit.test_regressions import BASE_MS, history_row, night_date, run_id

NIGHTS = 12  # enough for Otava's change points (min_points 10); the last night is the run under test
RUN = RunRef(run_id(NIGHTS - 1), night_date(NIGHTS - 1))


@pytest.fixture(params=["local", "s3"])
def lake_root(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> LakePath:
    """The same tests on a local lake and on a bucket of the moto server; the run has one landed cell so the
    report can load it."""
    monkeypatch.setenv("SIXNINES_CACHE", str(tmp_path / "cache"))  # an S3 lake stages cells here
    root: LakePath = tmp_path / "lake" if request.param == "local" else request.getfixturevalue("s3_lake")
    lake = Lake(root)
    info = RunInfo(RUN.run_id, RUN.run_date)
    staging = lake.staging_dir(info, "c1")
    (staging / "result.json").write_text(json.dumps({"cell_id": "c1", "status": "failed", "label": "nats core"}))
    lake.commit_cell(info, "c1", staging)
    return lake.root


def _rows(factor: float, nights: int = NIGHTS) -> list[dict]:
    """History rows of one cell: flat nights, the last one's e2e response-time p99 `factor` times higher."""
    out = []
    for night in range(nights):
        for metric, basis in (("e2e", "intended"), ("e2e", "sent")):
            bump = factor if (night == nights - 1 and basis == "intended") else 1.0
            values = {p: round(ms * 1e6 * (bump if p == "99" else 1.0)) for p, ms in BASE_MS.items()}
            out.append(history_row(night, metric, basis, values | {"99.9999": None}))
    return out


def _table(tag: str) -> pa.Table:
    """The run's percentile table as the Spark job hands it to publish (label carries `tag` to tell versions)."""
    return pa.Table.from_pylist([r | {"label": f"nats core {tag}"} for r in _rows(1.0) if r["run_id"] == RUN.run_id])


def _accounting(tag: str) -> list[dict]:
    counts = dict.fromkeys(("scheduled", "sent", "acknowledged", "received"), 1000)
    zero = dict.fromkeys(("lost", "duplicated", "acknowledged_but_lost"), 0)
    return [
        {"run_id": RUN.run_id, "cell_id": "cell-kafka-4.2.1", "label": f"nats core {tag}", "status": "ok"}
        | counts
        | zero
    ]


def _final(root: LakePath, area: str) -> LakePath:
    return run_output_dir(root, area, RUN.run_date, RUN.run_id)


def _crash_half_way(final: LakePath, files: dict[str, str]) -> None:
    """What a writer killed in the middle of `write_folder` leaves: some files of a new attempt (S3) or of a
    staging folder (local), never the marker or the rename."""
    if isinstance(final, S3Path):
        attempt, _ = new_attempt(final)
        for name, text in files.items():
            (attempt / name).write_text(text)
    else:
        staging = local_staging(final)
        for name, text in files.items():
            (staging / name).write_text(text)


def _area_keys(s3_client, root: LakePath, area: str) -> list[str]:
    """Every object of this run's folder in `area`, with the attempt token replaced by `*`."""
    assert isinstance(root, S3Path)
    prefix = f"{area}/run_date={RUN.run_date}/run_id={RUN.run_id}/"
    out = []
    for key in keys(s3_client, root, prefix):
        rest = key.removeprefix(prefix)
        out.append(rest if rest == COMMIT_MARKER else "attempt=*/" + rest.split("/", 1)[1])
    return sorted(out)


def test_published_tables_appear_whole_and_a_retry_replaces_them(
    lake_root: LakePath, request: pytest.FixtureRequest
) -> None:
    final = _final(lake_root, PUBLISHED_AREA)
    assert committed_folder(final) is None

    # A publish that died half way is not a publication: nothing to read, no history.
    _crash_half_way(final, {"percentiles.md": "# half"})
    assert committed_folder(final) is None
    assert committed_run_file(lake_root, PUBLISHED_AREA, RUN.run_date, RUN.run_id, "percentiles.md") is None

    first = publish(lake_root, RUN, _table("first"), _accounting("first"))
    assert committed_folder(final) == first
    assert "nats core first" in (first / "percentiles.md").read_text()
    assert read_parquet(history_file(lake_root, RUN.run_date, RUN.run_id))["label"][0].as_py() == "nats core first"

    # A second publish that dies half way leaves the first one in place, whole.
    _crash_half_way(final, {"percentiles.csv": "half,of,a,second\n"})
    found = committed_run_file(lake_root, PUBLISHED_AREA, RUN.run_date, RUN.run_id, "percentiles.csv")
    assert found is not None and "nats core first" in found.read_text()
    assert committed_run_file(lake_root, PUBLISHED_AREA, RUN.run_date, RUN.run_id, "percentiles.md") == (
        first / "percentiles.md"
    )

    # The retry replaces it: the new tables, and on S3 nothing of either earlier attempt.
    second = publish(lake_root, RUN, _table("second"), _accounting("second"))
    assert committed_folder(final) == second
    assert "nats core second" in (second / "percentiles.md").read_text()
    assert "nats core first" not in (second / "percentiles.csv").read_text()
    if isinstance(lake_root, S3Path):
        assert second != first and second.parent == final
        s3_client = request.getfixturevalue("s3_client")
        assert _area_keys(s3_client, lake_root, PUBLISHED_AREA) == [
            COMMIT_MARKER,
            "attempt=*/percentiles.csv",
            "attempt=*/percentiles.md",
        ]
        marker = json.loads((final / COMMIT_MARKER).read_text())
        assert (marker["attempt"], marker["files"]) == (
            second.name.removeprefix("attempt="),
            ["percentiles.csv", "percentiles.md"],
        )
    else:
        assert second == final and sorted(p.name for p in final.iterdir()) == ["percentiles.csv", "percentiles.md"]


def test_quarantine_and_publication_replace_each_other_whole(
    lake_root: LakePath, request: pytest.FixtureRequest
) -> None:
    published, quarantined = _final(lake_root, PUBLISHED_AREA), _final(lake_root, QUARANTINE_AREA)
    publish(lake_root, RUN, _table("first"), _accounting("first"))
    history = history_file(lake_root, RUN.run_date, RUN.run_id)

    # A quarantine that died half way: the report and the notifier see no validation result.
    _crash_half_way(quarantined, {"validation.json": json.dumps({"success": False, "failed": ["half"]})})
    assert load_run(lake_root, RUN.run_id).validation is None
    assert committed_run_file(lake_root, QUARANTINE_AREA, RUN.run_date, RUN.run_id, "validation.json") is None

    # The gate fails on a re-run: the publication and its history are withdrawn, the quarantine is committed.
    validation = {"run_id": RUN.run_id, "success": False, "failed": ["raw_cells: loss"]}
    folder = quarantine(lake_root, RUN, _table("bad").to_pylist(), _accounting("bad"), validation)
    assert committed_folder(quarantined) == folder
    assert committed_folder(published) is None and not history.exists()
    assert load_run(lake_root, RUN.run_id).validation == validation
    if isinstance(lake_root, S3Path):
        s3_client = request.getfixturevalue("s3_client")
        assert _area_keys(s3_client, lake_root, PUBLISHED_AREA) == []
        assert _area_keys(s3_client, lake_root, QUARANTINE_AREA) == [
            COMMIT_MARKER,
            "attempt=*/percentiles.csv",
            "attempt=*/percentiles.md",
            "attempt=*/validation.json",
        ]

    # Published again (the gate passes): the quarantine is withdrawn, the history is back.
    publish(lake_root, RUN, _table("again"), _accounting("again"))
    assert committed_folder(quarantined) is None and history.exists()
    assert load_run(lake_root, RUN.run_id).validation is None
    if isinstance(lake_root, S3Path):
        assert _area_keys(request.getfixturevalue("s3_client"), lake_root, QUARANTINE_AREA) == []


def test_regression_results_appear_whole_and_a_recheck_replaces_them(
    lake_root: LakePath, request: pytest.FixtureRequest
) -> None:
    final = _final(lake_root, REGRESSIONS_AREA)
    alerting = analyse(_rows(1.5), Settings(), RUN.run_id)
    assert alerting.alerts, "the 50 % rise of the last night must alert"
    quiet = analyse(_rows(1.5), Settings(magnitude=0.9), RUN.run_id)
    assert not quiet.alerts

    # A check that died half way, alerts.json already written: no reader may act on it.
    _crash_half_way(final, {"alerts.json": json.dumps(alerting.to_dict())})
    assert committed_run_file(lake_root, REGRESSIONS_AREA, RUN.run_date, RUN.run_id, "alerts.json") is None
    assert load_run(lake_root, RUN.run_id).regressions is None

    first = write_results(lake_root, alerting)
    assert committed_folder(final) == first
    found = committed_run_file(lake_root, REGRESSIONS_AREA, RUN.run_date, RUN.run_id, "alerts.json")
    assert found == first / "alerts.json"
    assert len(json.loads(found.read_text())["alerts"]) == len(alerting.alerts)
    assert read_parquet(first / "change_points.parquet")["alert"].to_pylist().count(True) == len(alerting.alerts)
    assert len(load_run(lake_root, RUN.run_id).regressions["alerts"]) == len(alerting.alerts)

    # A re-check with a higher bar replaces the whole folder: no alert left over from the first check.
    second = write_results(lake_root, quiet)
    assert committed_folder(final) == second
    assert json.loads((second / "alerts.json").read_text())["alerts"] == []
    assert load_run(lake_root, RUN.run_id).regressions["alerts"] == []
    if isinstance(lake_root, S3Path):
        assert second != first
        assert _area_keys(request.getfixturevalue("s3_client"), lake_root, REGRESSIONS_AREA) == [
            COMMIT_MARKER,
            "attempt=*/alerts.json",
            "attempt=*/change_points.parquet",
        ]


def test_a_write_that_fails_half_way_leaves_the_earlier_folder(
    lake_root: LakePath, request: pytest.FixtureRequest
) -> None:
    """A writer that fails (not killed) after its first file: the earlier version stays, whole, and the failed
    attempt is cleaned up."""
    final = _final(lake_root, PUBLISHED_AREA)
    before = write_folder(final, {"a.txt": b"one", "b.txt": b"one"})
    with pytest.raises(TypeError):
        write_folder(final, {"a.txt": b"two", "b.txt": None})  # type: ignore[dict-item]  # fails after a.txt
    assert committed_folder(final) == before
    assert [(before / n).read_text() for n in ("a.txt", "b.txt")] == ["one", "one"]
    if isinstance(lake_root, S3Path):
        assert _area_keys(request.getfixturevalue("s3_client"), lake_root, PUBLISHED_AREA) == [
            COMMIT_MARKER,
            "attempt=*/a.txt",
            "attempt=*/b.txt",
        ]
    else:
        assert [p.name for p in final.parent.iterdir()] == [final.name], "no staging folder left behind"
