"""The report's pure parts on tiny literal inputs: the 1/(1−p) axis, which points are drawn, ratio pairing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench_tasks.core.percentiles import summarize
from bench_tasks.report.charts import Curve, Points, scatter_chart, spectrum_chart
from bench_tasks.report.pairing import (
    CellKey,
    ReportError,
    pairs_across_runs,
    pairs_within_run,
    ratios,
    spec_differences,
)
from bench_tasks.report.spectrum import axis_ticks, drawn_percentiles, spectrum, tail_x


def test_tail_axis_gives_every_nine_the_same_width() -> None:
    assert [tail_x(p) for p in ("0", "50", "90", "99", "99.9", "99.9999")] == [1, 2, 10, 100, 1000, 1_000_000]
    with pytest.raises(ValueError, match="percentile must be in"):
        tail_x("100")


def test_axis_ends_at_the_first_tick_past_the_sample_count() -> None:
    assert axis_ticks(5) == [(1.0, "0 %"), (10.0, "90 %")]
    assert [label for _, label in axis_ticks(10_000)] == ["0 %", "90 %", "99 %", "99.9 %", "99.99 %", "99.999 %"]


def test_only_supported_percentiles_are_drawn() -> None:
    assert drawn_percentiles(0) == []
    assert drawn_percentiles(99) == ["50", "90"]
    assert drawn_percentiles(999) == ["50", "90", "99"]
    assert drawn_percentiles(1000) == ["50", "90", "99", "99.9"]


def test_spectrum_stops_at_the_sample_count_and_matches_the_table() -> None:
    values = np.arange(1, 1001, dtype=np.int64) * 1000  # 1 µs … 1 ms
    s = spectrum(values)
    assert s.x[0] == 1.0 and s.x[-1] == pytest.approx(1000.0)  # p = 1 − 1/1000 = 99.9 %, nothing beyond
    assert s.latency_ns[0] == 1000 and s.latency_ns[-1] == 999_000  # p99.9; the max is its own marker
    assert np.all(np.diff(s.latency_ns) >= 0)
    table = summarize(values).percentiles
    assert s.marks == {p: v for p, v in table.items() if v is not None}
    assert s.marks["99.9"] == 999_000 and s.max_ns == 1_000_000
    assert spectrum(np.array([], dtype=np.int64)).count == 0


def _key(cell_id: str, series: str, run: str = "r1", **workload: object) -> CellKey:
    spec = {"system": "nats", "version": "2.15.1", "broker": {"mode": "core"}, "workload": {"rate_per_s": 500}}
    spec["workload"] = {**spec["workload"], **workload}
    return CellKey(run, cell_id, series, cell_id, spec)


def test_spec_differences_are_dotted_paths() -> None:
    a = {"version": "1", "broker": {"mode": "core", "servers": 1}}
    b = {"version": "2", "broker": {"mode": "jetstream", "servers": 1}, "extra": 1}
    assert spec_differences(a, b) == ("broker.mode", "extra", "version")
    assert spec_differences(a, a) == ()


def test_cells_of_one_run_pair_when_one_field_differs() -> None:
    a, b, c = _key("a", "s1"), _key("b", "s2", rate_per_s=1000), _key("c", "s3", rate_per_s=2000, producers=2)
    (pair,) = pairs_within_run([a, b, c])
    assert (pair.a.cell_id, pair.b.cell_id, pair.differs) == ("a", "b", ("workload.rate_per_s",))


def test_runs_pair_by_series_key() -> None:
    old = [_key("a1", "s1", "A"), _key("a2", "s2", "A", rate_per_s=1000)]
    new_spec = {**old[0].spec, "version": "2.16.0"}
    new = [CellKey("B", "b1", "s1", "b1", new_spec)]
    (pair,) = pairs_across_runs(old, new)
    assert (pair.a.cell_id, pair.b.cell_id, pair.differs) == ("a1", "b1", ("version",))


def test_runs_without_a_shared_series_key_are_refused_naming_the_fields() -> None:
    with pytest.raises(ReportError) as raised:
        pairs_across_runs([_key("a1", "s1", "A")], [_key("b1", "s9", "B", rate_per_s=800)])
    assert str(raised.value) == (
        "cannot compare runs A and B: no cell of one shares a series key with a cell of the other "
        "(the closest cells differ in: workload.rate_per_s); a comparison pairs cells that differ at most in version"
    )
    assert raised.value.exit_code == 2


def test_ratio_is_missing_where_either_side_is_unsupported() -> None:
    a = {"50": 1.0, "90": 2.0, "99": None, "max": 4.0}
    b = {"50": 1.5, "90": None, "99": 3.0, "max": 2.0}
    r = ratios(a, b)
    assert (r["50"], r["90"], r["99"], r["99.9"], r["max"]) == (1.5, None, None, None, 0.5)


def test_spectrum_chart_is_inline_svg_with_named_series() -> None:
    s = spectrum(np.arange(1, 201, dtype=np.int64) * 1_000_000)
    svg = spectrum_chart("e2e", [Curve("response time", "spectrum-e2e-intended", s, "#c00")])
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert 'id="spectrum-e2e-intended"' in svg and 'id="spectrum-e2e-intended-max"' in svg
    assert "response time (n=200)" in svg and "99 %" in svg and "99.99 %" not in svg  # axis ends at 99.9 %
    assert "http://" not in svg.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )


def test_regressions_section_plots_each_alerted_series_with_its_change_point(tmp_path: Path) -> None:
    """A synthetic 40-night history with a 20 % p99 rise from night 30: the report shows the alert and the
    series it came from, change point marked."""
    from bench_tasks.regressions import detect
    from bench_tasks.regressions.history import read_history
    from bench_tasks.regressions.output import write_results
    from bench_tasks.regressions.series import build_series
    from bench_tasks.report.data import RunData
    from bench_tasks.report.run_view import regressions_section

    from .test_regressions import make_lake, step

    lake = make_lake(tmp_path, 40, step(1.2, 30))
    result = detect(lake)
    write_results(lake, result)
    run = RunData(tmp_path, result.run_id, result.run_date, [])
    run.regressions = result.to_dict()
    run.history_series = build_series(read_history(lake))[0]
    html = regressions_section(run)
    assert html.count('id="regression-0"') == 1 and 'id="regression-1"' not in html
    assert "change point" in html and "+21.3%" in html


def test_a_capacity_alert_is_plotted_in_msg_per_s(tmp_path: Path) -> None:
    """A capacity that fell from 50,000 to 30,000 msg/s: the report's chart of it is in msg/s, not ms."""
    from bench_tasks.regressions import detect
    from bench_tasks.regressions.detect import history_series
    from bench_tasks.report.data import RunData
    from bench_tasks.report.run_view import regressions_section

    from .test_capacity_regressions import capacity_lake

    result = detect(capacity_lake(tmp_path, [50_000, 50_500, 49_500, 50_200, 30_000]))
    run = RunData(tmp_path, result.run_id, result.run_date, [])
    run.regressions = result.to_dict()
    run.history_series = history_series(tmp_path)
    html = regressions_section(run)
    assert html.count('id="regression-0"') == 1 and "capacity (msg/s)" in html and "latency (ms)" not in html
    assert "30,000 msg/s" in html


def test_cell_ids_from_result_json_are_escaped_in_the_ratio_block() -> None:
    """result.json is data, not markup: a cell id carrying HTML reaches the page escaped, like every other field."""
    from bench_tasks.report.data import CellData
    from bench_tasks.report.pairing import Pair
    from bench_tasks.report.run_view import ratio_block

    hostile = '<img src=x onerror="alert(1)">'
    a, b = _key(hostile, "s1"), _key(hostile + "b", "s2", rate_per_s=1000)
    cells = [CellData(key, Path("."), {}, None) for key in (a, b)]
    html = ratio_block(Pair(a, b, ("workload.rate_per_s",)), *cells, "pair 1")
    assert "<img" not in html
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html


def test_a_metric_without_samples_still_gets_its_scatter_chart() -> None:
    """A cell stopped before its workers wrote samples (an Airflow phase watcher failing it) has metrics with
    no sample at all: the chart is drawn empty, on a linear axis, instead of failing the whole report."""
    empty = np.array([], dtype=np.int64)
    layers = [Points(name, f"scatter-x-publish-{name}", empty / 1e9, empty, "#c00") for name in ("sent", "intended")]
    phases = [("warmup", 0.0, 4.0), ("measure", 4.0, 10.0), ("cooldown", 10.0, 10.4)]
    svg = scatter_chart("publish: every sample by intended send time — a cell " + "x" * 80, layers, phases, [])
    assert svg.startswith("<svg") and 'id="scatter-x-publish-sent"' in svg
