"""Regression detection on synthetic histories written as real Parquet in the published-history layout.

Each night holds one cell (e2e and publish, response and service time, every percentile plus max) with
independent ±5 % uniform noise from a fixed seed; a per-leader row with a huge rise sits beside the overall
rows in every file to prove leader rows never reach the analysis.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench_tasks import PERCENTILES
from bench_tasks.lake.layout import history_file
from bench_tasks.regressions import RegressionError, Settings, analyse, detect, write_results
from bench_tasks.regressions.history import read_history
from bench_tasks.regressions.series import build_series, release_key

SERIES_KEY = "sk-kafka-e2e"
BASE_MS = {"50": 1.0, "90": 1.5, "99": 3.0, "99.9": 5.0, "99.99": 8.0, "99.999": 12.0, "99.9999": 16.0, "max": 20.0}
COUNT = 200_000  # supports up to p99.999; p99.9999 (needs 1 000 000) is null, as the analytics job writes it
Shape = Callable[[int, str, str, str], float]  # (night, metric, basis, percentile) → factor on the base value


def column(percentile: str) -> str:
    return "max_ns" if percentile == "max" else f"p{percentile.replace('.', '_')}_ns"


def flat(night: int, metric: str, basis: str, percentile: str) -> float:
    return 1.0


def step(factor: float, from_night: int) -> Shape:
    """`factor` on e2e response-time p99 from `from_night` on; everything else flat."""

    def shape(night: int, metric: str, basis: str, percentile: str) -> float:
        hit = night >= from_night and (metric, basis, percentile) == ("e2e", "intended", "99")
        return factor if hit else 1.0

    return shape


def run_id(night: int) -> str:
    return f"run-{night:03d}"


def night_date(night: int) -> str:
    return (dt.date(2026, 1, 1) + dt.timedelta(days=night)).isoformat()


def history_row(night: int, metric: str, basis: str, values_ns: dict[str, int | None], **over: object) -> dict:
    row = {
        "schema_version": 1,
        "run_id": run_id(night),
        "cell_id": "cell-kafka-4.2.1",
        "run_date": night_date(night),
        "series_key": SERIES_KEY,
        "system": "kafka",
        "version": "4.2.1",
        "measurement": "e2e",
        "label": "kafka acks=all 1 KiB",
        "status": "ok",
        "metric": metric,
        "basis": basis,
        "leader": None,
        "count": COUNT,
        "min_ns": 500_000,
        **{column(p): v for p, v in values_ns.items()},
        "mean_ns": 1.1e6,
        "stddev_ns": 2e5,
        "unsupported": ["99.9999"],
    }
    row.update(over)
    return row


def write_night(lake: Path, rows: list[dict]) -> Path:
    first = rows[0]
    path = history_file(lake, first["run_date"], first["run_id"])  # where spark_jobs.publish writes it
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def make_lake(lake: Path, nights: int, shape: Shape = flat, seed: int = 6, **over: object) -> Path:
    rng = random.Random(seed)
    for night in range(nights):
        rows = []
        for metric in ("e2e", "publish"):
            for basis in ("intended", "sent"):
                values: dict[str, int | None] = {
                    p: round(BASE_MS[p] * 1e6 * shape(night, metric, basis, p) * (1 + rng.uniform(-0.05, 0.05)))
                    for p in BASE_MS
                }
                values["99.9999"] = None
                rows.append(history_row(night, metric, basis, values, **over))
        # A leader row whose p99 grows 5x over the nights: it must be ignored (only leader null rows count).
        noisy = {p: round(BASE_MS[p] * 1e6 * (1 + 4 * night / nights)) for p in BASE_MS}
        rows.append(history_row(night, "e2e", "intended", noisy | {"99.9999": None}, leader=2, **over))
        write_night(lake, rows)
    return lake


def test_a_20_percent_rise_in_p99_alerts_once_at_night_30(tmp_path: Path) -> None:
    result = detect(make_lake(tmp_path, 40, step(1.2, 30)))
    assert result.run_id == run_id(39)
    assert len(result.alerts) == 1
    change = result.alerts[0].change
    assert (change.series_key, change.metric, change.basis, change.percentile) == (SERIES_KEY, "e2e", "intended", "99")
    assert (change.run_id, change.run_date, change.index) == (run_id(30), night_date(30), 30)
    assert change.method == "otava" and change.p_value is not None and change.p_value <= 0.001
    assert 0.15 < change.relative_change < 0.25
    assert 2.8 < change.before < 3.2 and 3.4 < change.after < 3.8
    assert change.runs_before == tuple(run_id(n) for n in range(30))
    assert change.runs_after == tuple(run_id(n) for n in range(30, 40))
    assert change.cell_ids == ("cell-kafka-4.2.1",) and change.versions_before == change.versions_after == ("4.2.1",)
    assert change.label == "kafka acks=all 1 KiB" and change.system == "kafka"
    assert [c for c in result.change_points if c != change] == []


def test_sixty_nights_of_noise_raise_nothing(tmp_path: Path) -> None:
    result = detect(make_lake(tmp_path, 60))
    # 2 metrics × 2 bases × 7 supported percentiles incl. max; p99.9999 is never supported.
    assert result.series_checked == 28
    assert result.skipped == {"unsupported": 4}
    assert result.alerts == ()
    assert result.change_points == ()


def test_a_20_percent_improvement_is_a_change_point_without_alert(tmp_path: Path) -> None:
    result = detect(make_lake(tmp_path, 40, step(0.8, 30)))
    assert result.alerts == ()
    [change] = result.change_points
    assert (change.metric, change.basis, change.percentile, change.run_id) == ("e2e", "intended", "99", run_id(30))
    assert -0.25 < change.relative_change < -0.15 and not change.worse


def test_the_alert_stays_up_after_the_shift_and_clears_once_fixed(tmp_path: Path) -> None:
    def shape(night: int, metric: str, basis: str, percentile: str) -> float:
        return step(1.2, 20)(night, metric, basis, percentile) if night < 35 else 1.0

    lake = make_lake(tmp_path, 50, shape)
    assert len(detect(lake, run_id=run_id(34)).alerts) == 1  # history after night 34 is ignored
    fixed = detect(lake)
    assert fixed.alerts == ()
    assert [(c.run_id, c.worse) for c in fixed.change_points] == [(run_id(20), True), (run_id(35), False)]


@pytest.mark.parametrize(
    ("last_factor", "alerts", "changes"),
    [(1.3, 1, 1), (1.02, 0, 0), (0.7, 0, 1)],
    ids=["30% worse alerts", "within noise", "30% better recorded only"],
)
def test_short_history_compares_the_newest_run_with_a_baseline(
    tmp_path: Path, last_factor: float, alerts: int, changes: int
) -> None:
    result = detect(make_lake(tmp_path, 6, step(last_factor, 5)))
    assert (len(result.alerts), len(result.change_points)) == (alerts, changes)
    for change in result.change_points:
        assert change.method == "baseline" and change.p_value is None
        assert change.runs_before == tuple(run_id(n) for n in range(5)) and change.runs_after == (run_id(5),)
        assert change.percentile == "99" and change.spread is not None


def test_short_history_respects_a_noisy_baseline(tmp_path: Path) -> None:
    """+15 % over the median is above the magnitude but inside the baseline's min–max spread: no alert."""
    rows = []
    for night, p99_ms in enumerate([3.0, 2.4, 3.6, 2.7, 3.0, 3.45]):
        values: dict[str, int | None] = {p: round(BASE_MS[p] * 1e6) for p in BASE_MS} | {"99.9999": None}
        rows.append(history_row(night, "e2e", "intended", values | {"99": round(p99_ms * 1e6)}))
    assert analyse(rows, Settings()).alerts == ()
    rows[-1][column("99")] = round(3.7e6)  # now outside the spread and > 10 % over the median
    [alert] = analyse(rows, Settings()).alerts
    assert alert.change.before == pytest.approx(3.0) and alert.change.spread == pytest.approx((2.4, 3.6))


def test_too_short_for_a_baseline_says_nothing(tmp_path: Path) -> None:
    result = detect(make_lake(tmp_path, 3, step(2.0, 2)))
    assert (result.alerts, result.change_points) == ((), ())


def test_release_order_is_numeric_not_by_date_or_text() -> None:
    assert sorted(["4.3.1", "4.10.0", "3.9.2", "4.2.1"], key=release_key) == ["3.9.2", "4.2.1", "4.3.1", "4.10.0"]


def test_version_view_orders_runs_by_release_and_names_the_versions(tmp_path: Path) -> None:
    """Four runs each of 4.2.1, 3.9.2 and 4.3.1, in that date order; 4.3.1 is 20 % slower at p99."""
    rng = random.Random(42)
    versions = ["4.2.1"] * 4 + ["3.9.2"] * 4 + ["4.3.1"] * 4
    for night, version in enumerate(versions):
        factor = 1.2 if version == "4.3.1" else 1.0
        values = {p: round(BASE_MS[p] * 1e6 * (1 + rng.uniform(-0.05, 0.05))) for p in BASE_MS} | {"99.9999": None}
        values["99"] = round(values["99"] * factor)
        write_night(tmp_path, [history_row(night, "e2e", "intended", values, version=version, cell_id=f"c-{version}")])
    series, _ = build_series(read_history(tmp_path))
    by_version = [s for s in series if s.view == "version" and s.percentile == "99"]
    assert [p.version for p in by_version[0].points] == ["3.9.2"] * 4 + ["4.2.1"] * 4 + ["4.3.1"] * 4
    result = detect(tmp_path)
    [alert] = [a for a in result.alerts if a.change.view == "version"]
    assert alert.change.versions_before == ("3.9.2", "4.2.1") and alert.change.versions_after == ("4.3.1",)
    assert set(alert.change.cell_ids) == {"c-3.9.2", "c-4.2.1", "c-4.3.1"}


def test_two_versions_in_one_run_keep_separate_nightly_series(tmp_path: Path) -> None:
    """A run that compares 3.9.2 and 4.2.1 side by side holds two cells of one series key: the nightly view
    follows each cell on its own instead of interleaving releases night by night."""
    flat_ns: dict[str, int | None] = {p: round(BASE_MS[p] * 1e6) for p in BASE_MS} | {"99.9999": None}
    for night in range(3):
        write_night(
            tmp_path,
            [
                history_row(night, "e2e", "intended", flat_ns, version="3.9.2", cell_id="c-old"),
                history_row(night, "e2e", "intended", flat_ns, version="4.2.1", cell_id="c-new"),
            ],
        )
    series, _ = build_series(read_history(tmp_path))
    nightly = [s for s in series if s.view == "nightly" and s.percentile == "99"]
    assert [{p.cell_id for p in s.points} for s in nightly] == [{"c-new"}, {"c-old"}]
    assert all([p.run_id for p in s.points] == [run_id(n) for n in range(3)] for s in nightly)


def test_unsupported_percentiles_are_left_out_never_numbers(tmp_path: Path) -> None:
    lake = make_lake(tmp_path, 12)
    # The newest night had too few samples for p99.99 and beyond: null, as the analytics job writes them.
    path = history_file(lake, night_date(11), run_id(11))
    rows = pq.read_table(path).to_pylist()
    for r in rows:
        r.update({column("99.99"): None, column("99.999"): None, "count": 5_000})
    pq.write_table(pa.Table.from_pylist(rows), path)
    series, unsupported = build_series(read_history(lake))
    p9999 = [s for s in series if s.percentile == "99.99"]
    assert unsupported == 4 and all(len(s.points) == 11 for s in p9999)
    result = detect(lake)
    assert result.skipped == {"unsupported": 4, "no_point_in_checked_run": 8}
    assert {c.percentile for c in result.change_points} <= {"50", "90", "99", "99.9", "max"}


def test_a_missing_column_names_the_file_and_the_column(tmp_path: Path) -> None:
    part = history_file(make_lake(tmp_path, 2), night_date(1), run_id(1))
    pq.write_table(pq.read_table(part).drop_columns(["p99_ns"]), part)
    with pytest.raises(RegressionError, match=rf"{run_id(1)}\.parquet: missing column\(s\) p99_ns"):
        detect(tmp_path)


def test_an_empty_lake_and_bad_settings_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(RegressionError, match="no published history") as caught:
        detect(tmp_path)
    assert caught.value.exit_code == 2
    with pytest.raises(RegressionError, match="magnitude"):
        Settings(magnitude=-0.1)


def test_results_are_written_under_the_checked_run(tmp_path: Path) -> None:
    result = detect(make_lake(tmp_path, 40, step(1.2, 30)))
    folder = write_results(tmp_path, result)
    assert folder == tmp_path / "regressions" / f"run_date={night_date(39)}" / f"run_id={run_id(39)}"
    table = pq.read_table(folder / "change_points.parquet").to_pylist()
    assert [(r["run_id"], r["percentile"], r["alert"]) for r in table] == [(run_id(30), "99", True)]
    stored = json.loads((folder / "alerts.json").read_text())
    assert stored["schema_version"] == 2 and stored["alerts"][0]["runs_after"][0] == run_id(30)
    write_results(tmp_path, result)  # re-checking replaces the folder, leaves no staging behind
    assert sorted(p.name for p in folder.parent.iterdir()) == [f"run_id={run_id(39)}"]


def sixnines(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The console entry point in-process (argv, exit code, stdout, stderr as a user sees them); a subprocess
    would spend most of its time importing scipy."""
    from bench_tasks.cli import main

    argv = sys.argv
    sys.argv = ["sixnines", "regressions", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    regressed = make_lake(tmp_path / "regressed", 40, step(1.2, 30))
    code, stdout, stderr = sixnines(capsys, "--lake", str(regressed), "--json")
    assert code == 4, stderr
    payload = json.loads(stdout)
    assert [a["percentile"] for a in payload["alerts"]] == ["99"] and payload["written"]
    code, stdout, _ = sixnines(capsys, "--lake", str(regressed), "--no-write")
    assert code == 4 and "ALERT" in stdout and "regression:" in stdout
    assert sixnines(capsys, "--lake", str(make_lake(tmp_path / "quiet", 20)))[0] == 0
    code, _, stderr = sixnines(capsys, "--lake", str(tmp_path / "empty"))
    assert code == 2 and "no published history" in stderr
    assert sixnines(capsys, "--lake", str(regressed), "--p-value", "2")[0] == 2


def test_every_percentile_of_the_table_is_a_series(tmp_path: Path) -> None:
    series, _ = build_series(read_history(make_lake(tmp_path, 2)))
    assert {s.percentile for s in series} == {*PERCENTILES, "max"} - {"99.9999"}


def test_a_rise_within_the_repeats_own_noise_does_not_alert(tmp_path: Path) -> None:
    """Repeated cells record their run-to-run variation: a 20 % rise in p99 alerts when the repeats agree
    within 5 %, and not when they vary by 30 % (the bar becomes the noise); the alert names the noise."""
    quiet = detect(make_lake(tmp_path / "quiet", 40, step(1.2, 30), p99_variation_pct=5.0))
    assert len(quiet.alerts) == 1
    change = quiet.alerts[0].change
    assert change.noise == pytest.approx(0.05) and change.threshold == pytest.approx(0.10)
    assert "repeats vary by 5.0%" in quiet.alerts[0].summary()

    noisy = detect(make_lake(tmp_path / "noisy", 40, step(1.2, 30), p99_variation_pct=30.0))
    assert noisy.alerts == ()
    shift = [c for c in noisy.change_points if c.percentile == "99" and c.metric == "e2e" and c.basis == "intended"]
    assert shift and shift[0].threshold == pytest.approx(0.30)  # still recorded as a change point


def test_a_failed_cells_published_rows_are_in_no_series_and_never_reused(tmp_path: Path) -> None:
    """A failed cell is published with its reason (the gate passes the run), but its percentiles measure the
    failure: the history readers leave it out, and `reuse_published` measures it again."""
    from bench_tasks.regressions.history import published_run

    values: dict[str, int | None] = {p: round(BASE_MS[p] * 1e6) for p in BASE_MS} | {"99.9999": None}
    write_night(tmp_path, [history_row(0, "e2e", "intended", values)])
    starved = {p: v * 1000 if v else v for p, v in values.items()}
    write_night(tmp_path, [history_row(1, "e2e", "intended", starved, status="failed", cell_id="cell-failed")])
    rows = read_history(tmp_path)
    assert [r["run_id"] for r in rows] == [run_id(0)]
    assert published_run(tmp_path, "cell-kafka-4.2.1") == (night_date(0), run_id(0))
    assert published_run(tmp_path, "cell-failed") is None
