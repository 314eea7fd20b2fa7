"""Capacity in the regression history: a release that holds less alerts, one that holds more does not, and a
search the harness ended never counts as the broker's capacity.

Capacity rows are written where spark_jobs.publish writes them (`history/capacity/D__R.parquet`) beside a flat
percentile history (tests/unit/test_regressions.make_lake), and read back through `detect`, as the sweep does.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench_tasks.lake.layout import CAPACITY_HISTORY_DIR, history_file
from bench_tasks.regressions import detect, write_results
from bench_tasks.regressions.detect import history_series

from .test_regressions import make_lake, night_date, run_id

OBJECTIVES = "e2e p99 < 10ms"
KEY = "sk-nats-core-1k"


def capacity_row(night: int, capacity: float | None, limit: str = "objective", version: str = "2.15.1") -> dict:
    return {
        "schema_version": 2,
        "run_id": run_id(night),
        "run_date": night_date(night),
        "cell_id": f"cell-nats-{version}",
        "series_key": KEY,
        "label": "nats core 1 KiB",
        "system": "nats",
        "version": version,
        "objectives": OBJECTIVES,
        "capacity_per_s": capacity,
        "limit": limit,
        "limit_why": "at 128000/s: e2e p99 193 ms > 10 ms",
        "broker_bound": limit in ("objective", "loss", "backlog") and capacity is not None,
        "steps": 6,
    }


def write_capacity(lake: Path, night: int, rows: list[dict]) -> None:
    path = history_file(lake, night_date(night), run_id(night), CAPACITY_HISTORY_DIR)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)


def capacity_lake(tmp_path: Path, capacities: list[float], limits: dict[int, str] | None = None) -> Path:
    """A percentile history of len(capacities) flat nights, each night's capacity search beside it."""
    lake = make_lake(tmp_path, len(capacities))
    for night, capacity in enumerate(capacities):
        write_capacity(lake, night, [capacity_row(night, capacity, (limits or {}).get(night, "objective"))])
    return lake


def noisy(values: list[float], seed: int = 20) -> list[float]:
    rng = random.Random(seed)
    return [v * (1 + rng.uniform(-0.03, 0.03)) for v in values]


def capacity_alerts(result) -> list:
    return [a for a in result.alerts if a.change.metric == "capacity"]


def test_a_capacity_drop_after_five_nights_alerts_with_the_rates(tmp_path: Path) -> None:
    result = detect(capacity_lake(tmp_path, [118_000, 120_000, 116_000, 119_000, 117_000, 90_000]))
    (alert,) = capacity_alerts(result)
    change = alert.change
    assert (change.series_key, change.basis, change.percentile, change.method) == (KEY, OBJECTIVES, "", "baseline")
    assert change.unit == "msg/s" and not change.higher_is_worse and change.worse
    assert change.before == 118_000 and change.after == 90_000 and change.relative_change < -0.2
    assert "118,000 msg/s → 90,000 msg/s" in alert.summary() and "capacity at e2e p99 < 10ms" in alert.summary()
    assert result.alerts == tuple(capacity_alerts(result))  # the flat latency history raised nothing


def test_a_capacity_rise_is_recorded_but_never_alerts(tmp_path: Path) -> None:
    result = detect(capacity_lake(tmp_path, [100_000, 101_000, 99_000, 100_500, 150_000]))
    assert capacity_alerts(result) == []
    (change,) = [c for c in result.change_points if c.metric == "capacity"]
    assert change.after == 150_000 and not change.worse and change.worsening < -0.4


def test_a_long_capacity_history_finds_the_drop_with_otava(tmp_path: Path) -> None:
    capacities = noisy([32_000.0] * 20 + [24_000.0] * 10)
    result = detect(capacity_lake(tmp_path, capacities))
    (alert,) = capacity_alerts(result)
    assert alert.change.method == "otava" and alert.change.run_id == run_id(20)
    assert -0.3 < alert.change.relative_change < -0.2


def test_a_search_the_harness_ended_is_not_the_brokers_capacity(tmp_path: Path) -> None:
    """The newest night's search ended by harness saturation at a low rate: no alert, counted as skipped; an
    earlier harness-bound night is no part of the baseline either."""
    capacities = [118_000, 40_000, 120_000, 116_000, 119_000, 30_000]
    result = detect(capacity_lake(tmp_path, capacities, limits={1: "harness", 5: "harness"}))
    assert capacity_alerts(result) == []
    assert result.skipped["capacity_not_the_broker"] == 1
    (series,) = [s for s in history_series(tmp_path) if s.metric == "capacity"]
    assert [p.value for p in series.points] == [118_000, 120_000, 116_000, 119_000]


def test_an_upgrade_that_holds_less_alerts_naming_both_releases(tmp_path: Path) -> None:
    """Nightly searches of `version: latest` follow the cell across an upgrade (the series key leaves the
    version out): the release that holds less is named after the shift, the one before it before."""
    lake = make_lake(tmp_path, 5)
    for night in range(4):
        write_capacity(lake, night, [capacity_row(night, 30_000 + 500 * night, version="2.10.0")])
    write_capacity(lake, 4, [capacity_row(4, 20_000, version="2.15.1")])
    (alert,) = capacity_alerts(detect(lake))
    assert (alert.change.versions_before, alert.change.versions_after) == (("2.10.0",), ("2.15.1",))
    assert alert.change.after == 20_000


def test_capacity_alerts_are_written_with_their_unit(tmp_path: Path) -> None:
    result = detect(capacity_lake(tmp_path, [50_000, 50_500, 49_500, 50_200, 30_000]))
    folder = write_results(tmp_path, result)
    written = json.loads((Path(str(folder)) / "alerts.json").read_text())
    (alert,) = [a for a in written["alerts"] if a["metric"] == "capacity"]
    assert written["schema_version"] == 2
    assert (alert["unit"], alert["higher_is_worse"], alert["after"]) == ("msg/s", False, 30_000)
    table = pq.read_table(Path(str(folder)) / "change_points.parquet").to_pylist()
    assert [(r["unit"], r["alert"]) for r in table if r["metric"] == "capacity"] == [("msg/s", True)]
