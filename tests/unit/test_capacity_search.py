"""The capacity search on synthetic steps: geometric steps up, bisection down to the resolution, the limit named
by the failing step nearest above the capacity, and a harness-bound answer never passed off as the broker's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench_tasks.capacity.search import Search, Step
from bench_tasks.errors import ObjectiveError
from bench_tasks.spec.capacity import parse_objective


def one_cell_matrix() -> dict[str, Any]:
    """A matrix of one NATS core cell at 100 msg/s, as a parsed YAML file would give it."""
    return {
        "name": "t",
        "systems": [{"system": "nats", "versions": ["2.15.1"], "broker": {"mode": "core"}}],
        "workload": {"message_size_bytes": 64, "rate_per_s": 100, "measure_s": 3},
        "measurements": ["e2e"],
    }


def drive(search: Search, breaks_at: float, verdict: str = "objective", limit: int = 50) -> list[float]:
    """Run the search against a broker that holds every rate below `breaks_at`; the rates it offered."""
    offered = []
    while (rate := search.next_rate()) is not None:
        assert len(offered) < limit, offered
        offered.append(rate)
        search.record(Step(rate, "pass" if rate < breaks_at else verdict, "synthetic"))  # type: ignore[arg-type]
    return offered


def test_geometric_steps_then_bisection_to_the_resolution() -> None:
    search = Search(100, 100_000)
    offered = drive(search, breaks_at=1000)
    assert offered[:5] == [100, 200, 400, 800, 1600]
    result = search.result()
    assert result["limit"] == "objective" and result["broker_bound"]
    low = result["capacity_per_s"]
    high = min(s["rate_per_s"] for s in result["steps"] if s["verdict"] != "pass")
    assert low < 1000 <= high <= low * 1.05
    assert len(offered) <= 5 + 5  # log2(1600/800 / 0.05) bisections at most


def test_a_rate_held_up_to_the_maximum_says_the_capacity_is_higher() -> None:
    search = Search(100, 300)
    assert drive(search, breaks_at=1e9) == [100, 200, 300]
    result = search.result()
    assert (result["capacity_per_s"], result["limit"], result["broker_bound"]) == (300, "max-rate", False)


def test_a_harness_bound_search_is_not_the_broker_s_capacity() -> None:
    search = Search(1000, 100_000, resolution=0.1)
    drive(search, breaks_at=5000, verdict="harness")
    result = search.result()
    assert result["limit"] == "harness" and not result["broker_bound"]
    assert 4000 < result["capacity_per_s"] < 5000


def test_a_first_step_that_fails_holds_nothing() -> None:
    search = Search(1000, 100_000)
    assert drive(search, breaks_at=10) == [1000]
    result = search.result()
    assert result["capacity_per_s"] is None and result["limit"] == "objective" and not result["broker_bound"]


def test_the_limit_is_the_failing_step_nearest_above_the_capacity() -> None:
    search = Search(100, 10_000)
    for rate, verdict in ((100, "pass"), (200, "pass"), (400, "harness"), (283, "loss"), (238, "pass")):
        search.record(Step(rate, verdict, "synthetic"))  # type: ignore[arg-type]
    capacity, high = search.bounds()
    assert capacity == 238 and high is not None and high.verdict == "loss"


@pytest.mark.parametrize(
    ("text", "metric", "percentile", "bound_ns"),
    [
        ("e2e p99 < 10ms", "e2e", "99", 10_000_000),
        ("publish p99.9 < 50 ms", "publish", "99.9", 50_000_000),
        ("rtt max < 1s", "rtt", "max", 1_000_000_000),
        ("e2e p50<250us", "e2e", "50", 250_000),
        ("backlog p99 < 1000 msgs", "backlog", "99", 1000),
        ("backlog max < 5 messages", "backlog", "max", 5),
    ],
)
def test_objectives_parse(text: str, metric: str, percentile: str, bound_ns: int) -> None:
    o = parse_objective(text)
    assert (o.metric, o.percentile, o.bound) == (metric, percentile, bound_ns)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("e2e p99 10ms", "expected 'METRIC pNN < NUMBER UNIT'"),
        ("e2e p95 < 1ms", "percentile p95 — one of p50"),
        ("e2e p99 < 1000 msgs", "only 'backlog' is measured in"),
        ("backlog p99 < 10ms", "the backlog is counted in messages"),
        ("backlog p99 < 10.5 msgs", "a whole number of messages"),
        ("backlog max < 0 msgs", "above zero"),
    ],
)
def test_a_bad_objective_names_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(ObjectiveError, match=words):
        parse_objective(text)


@pytest.mark.parametrize("breaks_at", [150, 999, 1001, 5000, 77_777, 1e9])
def test_no_search_takes_more_steps_than_the_plan_says(breaks_at: float) -> None:
    """`sixnines cells` plans a capacity matrix's wall time with `max_search_steps`."""
    from types import SimpleNamespace

    from bench_tasks.capacity.search import max_search_steps

    spec = SimpleNamespace(start_rate_per_s=None, max_rate_per_s=100_000, factor=2.0, resolution=0.05)
    search = Search(100, 100_000)
    offered = drive(search, breaks_at)
    assert len(offered) <= max_search_steps(spec, [100]) == 11 + 4


@pytest.mark.parametrize("resolution", [0.001, 0.01])
@pytest.mark.parametrize("breaks_at", [101.5, 1414.5, 9995, 77_777])
def test_a_midpoint_that_rounds_onto_a_bound_ends_the_search(resolution: float, breaks_at: float) -> None:
    """Midpoints are rounded to 3 figures: where that lands on a bound (1,410/s between 1,410 and 1,420), the
    search has its answer and ends, at whatever resolution it was asked for, never offering a rate twice."""
    search = Search(100, 100_000, resolution=resolution)
    offered = drive(search, breaks_at)
    assert len(offered) == len(set(offered))
    low, high = search.bounds()
    assert low is not None and high is not None and low < breaks_at <= high.rate_per_s


@pytest.mark.parametrize("factor", [1.1, 1.5, 2.0, 3.0, 10.0])
@pytest.mark.parametrize("start", [100, 123.4, 999, 1001, 5000])
def test_no_search_at_the_finest_resolution_outgrows_its_plan(factor: float, start: float) -> None:
    """The Airflow search task's timeout is `max_search_steps` steps long: at the resolution floor, wherever the
    rate breaks, the search must end within it."""
    from types import SimpleNamespace

    from bench_tasks.capacity.search import MIN_RESOLUTION, max_search_steps

    spec = SimpleNamespace(start_rate_per_s=start, max_rate_per_s=1e6, factor=factor, resolution=MIN_RESOLUTION)
    planned = max_search_steps(spec, [start])
    for breaks_at in [start * 1.0001**k for k in range(0, 120_000, 97)]:
        search = Search(start, 1e6, factor, MIN_RESOLUTION)
        assert len(drive(search, breaks_at, limit=planned + 1)) <= planned, (breaks_at, search.steps)


def test_the_resolution_has_a_floor_named_in_the_matrix_and_on_the_command_line() -> None:
    """Finer than 1 % a 3-figure midpoint cannot bisect (and no step's noise is that small): refused by name."""
    from bench_tasks.capacity.search import MIN_RESOLUTION
    from bench_tasks.errors import MatrixError
    from bench_tasks.spec.matrix import parse_matrix

    capacity = {"objectives": ["e2e p99 < 10ms"], "max_rate_per_s": 1000, "resolution": MIN_RESOLUTION / 10}
    with pytest.raises(MatrixError, match=r"capacity\.resolution"):
        parse_matrix({**one_cell_matrix(), "capacity": capacity}, "m.yaml")
    parse_matrix({**one_cell_matrix(), "capacity": {**capacity, "resolution": MIN_RESOLUTION}}, "m.yaml")
    matrix = str(Path(__file__).parents[2] / "matrices" / "quick.yaml")
    command = [sys.executable, "-m", "bench_tasks", "capacity", matrix, "--max-rate", "1000", "--resolution", "0.001"]
    done = subprocess.run([*command, "--slo", "e2e p99 < 10ms"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--resolution" in done.stderr, done.stderr


def test_a_step_that_cannot_start_ends_the_search_as_failed_and_keeps_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The runner raising (a broker that would not start) is a failed step: the result keeps it and says the
    capacity is not the broker's; the search is not lost to the exception."""
    from rich.console import Console

    from bench_tasks.capacity import run as capacity_run
    from bench_tasks.errors import CellError
    from bench_tasks.lake.layout import Lake, RunInfo
    from bench_tasks.spec.matrix import parse_matrix

    (cell,) = parse_matrix(one_cell_matrix(), "m.yaml").cells

    def no_broker(*_args: object) -> None:
        raise CellError(cell.id, "nats-server did not start")

    monkeypatch.setattr(capacity_run, "run_cell", no_broker)
    bounds = capacity_run.Bounds(1000)
    result = capacity_run.search_capacity(cell, [], bounds, Lake(tmp_path), RunInfo.new(), Console(quiet=True))
    (step,) = result["steps"]
    assert (step["verdict"], step["rate_per_s"]) == ("failed", 100) and "did not start" in step["why"]
    assert result["capacity_per_s"] is None and result["limit"] == "failed" and not result["broker_bound"]


def two_cell_matrix(folder: Path) -> Path:
    """A matrix file of two NATS core cells (64 B and 128 B messages)."""
    import yaml

    raw = one_cell_matrix()
    raw["systems"][0]["axes"] = {"workload.message_size_bytes": [64, 128]}
    path = folder / "two.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_ctrl_c_keeps_every_finished_search_in_capacity_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`sixnines capacity` records each search in the run's capacity.json as it ends: stopped with Ctrl-C in the
    second cell's search, the run still holds the first cell's result, and so still reads as a capacity run."""
    from typer.testing import CliRunner

    from bench_tasks.capacity import run as capacity_run
    from bench_tasks.cli import app
    from bench_tasks.errors import CellError
    from bench_tasks.spec.matrix import load_matrix

    matrix = two_cell_matrix(tmp_path)
    first, second = load_matrix(matrix).cells

    def step(cell: Any, *_args: object) -> None:
        if cell.spec.workload.message_size_bytes == first.spec.workload.message_size_bytes:
            raise CellError(cell.id, "nats-server did not start")  # a failed step: the first search ends
        raise KeyboardInterrupt  # Ctrl-C in the second search

    monkeypatch.setattr(capacity_run, "run_cell", step)
    lake = tmp_path / "lake"
    args = ["capacity", str(matrix), "--slo", "e2e p99 < 10ms", "--max-rate", "1000", "--lake", str(lake)]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 130, done.output  # interrupted, as the shell says of Ctrl-C
    (saved,) = lake.rglob("capacity.json")
    (found,) = json.loads(saved.read_text())["cells"]
    assert found["cell_id"] == first.id and found["limit"] == "failed" and found["cell_id"] != second.id
    assert (saved.parent / "capacity.html").exists()
    assert sorted(p.name for p in saved.parent.iterdir()) == ["capacity.html", "capacity.json"]


def test_a_write_cut_short_leaves_the_previous_capacity_json_whole(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """capacity.json is replaced, never rewritten in place: a write that fails part-way (the disk filled up)
    leaves the searches recorded before it readable."""
    from bench_tasks.capacity.run import write_capacity
    from bench_tasks.lake.layout import Lake, RunInfo

    lake, run = Lake(tmp_path), RunInfo.new()
    before = {"cell_id": "a", "steps": [], "label": "a", "capacity_per_s": 100, "limit": "max-rate"}
    write_capacity(lake, run, [{**before, "limit_why": "held", "broker_bound": False, "objectives": []}])
    saved = lake.run_dir(run) / "capacity.json"
    kept = saved.read_text()

    def disk_fills(path: Path, data: Any, *_args: object, **_kwargs: object) -> None:
        with open(path, "wb") as handle:
            handle.write((data.encode() if isinstance(data, str) else data)[:10])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_fills)
    monkeypatch.setattr(Path, "write_bytes", disk_fills)
    with pytest.raises(OSError, match="No space"):
        write_capacity(lake, run, [])
    assert saved.read_text() == kept and json.loads(kept)["cells"][0]["cell_id"] == "a"


def test_a_step_is_the_cell_at_its_rate_measured_for_step_s() -> None:
    """`--step-s` / `capacity.step_s` sets every step's measure phase; each step is a cell of its own id."""
    from bench_tasks.capacity.run import Bounds, at_rate
    from bench_tasks.spec.capacity import CapacitySpec
    from bench_tasks.spec.matrix import parse_matrix

    capacity = {"objectives": ["e2e p99 < 10ms"], "max_rate_per_s": 1000, "step_s": 1.5}
    matrix = parse_matrix({**one_cell_matrix(), "capacity": capacity}, "m.yaml")
    (cell,) = matrix.cells
    assert isinstance(matrix.capacity, CapacitySpec)
    bounds = Bounds.of(matrix.capacity)
    step = at_rate(cell, 400, bounds.step_s)
    assert (step.spec.workload.rate_per_s, step.spec.workload.measure_s) == (400, 1.5)
    assert at_rate(cell, 400).spec.workload.measure_s == 3 and len({cell.id, step.id, at_rate(cell, 400).id}) == 3


def test_a_background_that_follows_the_rate_is_scaled_with_each_step_and_the_others_are_not() -> None:
    """OMB's max-rate search over several topics: the other topics' load (a background) grows with the measured
    topic's rate; a background that does not follow stays the fixed condition it was, and dumps as before."""
    from bench_tasks.capacity.run import at_rate
    from bench_tasks.spec.matrix import parse_matrix

    background = {"message_size_bytes": 64, "rate_per_producer_per_s": 2.5, "producers": 4}
    raw = one_cell_matrix()
    raw["systems"][0]["background"] = {"others": {**background, "follows_rate": True}, "fixed": background}
    (cell,) = parse_matrix(raw, "m.yaml").cells
    step = at_rate(cell, 400)
    assert step.spec.background["others"].rate_per_producer_per_s == 10.0
    assert step.spec.background["fixed"].rate_per_producer_per_s == 2.5
    dumped = step.spec.model_dump(mode="json")["background"]
    assert dumped["others"]["follows_rate"] is True and "follows_rate" not in dumped["fixed"]


@pytest.mark.parametrize(
    ("reason", "verdict"),
    [
        ("generator fell behind its schedule: producers did not finish their schedule in time: 900 sent/s", "harness"),
        ("measure: broker node 1 (pid 4242) died during measure", "failed"),
    ],
)
def test_a_cell_that_ended_before_its_analysis_is_judged_by_its_reason(reason: str, verdict: str) -> None:
    """A cell cut off before its analysis (a producer that could not finish its schedule in time) has only its
    reason to say whose fault it was: the harness's falling behind must still end a search as `harness`, never
    as a failed step that could be read as the broker's."""
    from bench_tasks.capacity.judge import judge
    from bench_tasks.cell.landing import CellReport
    from bench_tasks.spec.matrix import parse_matrix

    (cell,) = parse_matrix(one_cell_matrix(), "m.yaml").cells
    step = judge(CellReport(cell, "failed", reason, None, None, []), [])
    assert (step.verdict, step.why, step.rate_per_s) == (verdict, reason, 100)


def paced_cell_report(tmp_path: Path) -> Any:
    """The one-cell matrix's cell (100 msg/s) landed with 300 messages over a 3 s measure phase, one every 10 ms,
    each received 4 ms after it was sent: nothing lost, everything arrived, and the backlog 1 for 40 % of the
    phase and 0 for the rest."""
    import pyarrow as pa

    from bench_tasks.cell.landing import CellReport
    from bench_tasks.core.analysis import analyze
    from bench_tasks.lake.records import RECEIVED_SCHEMA, SENT_SCHEMA
    from bench_tasks.spec.matrix import parse_matrix

    (cell,) = parse_matrix(one_cell_matrix(), "m.yaml").cells
    at = [i * 10_000_000 for i in range(300)]
    sent = {"producer_id": [0] * 300, "seq": list(range(300)), "intended_ns": at, "sent_ns": at}
    received = {**sent, "consumer_id": [0] * 300, "received_ns": [t + 4_000_000 for t in at], "hop": [0] * 300}
    tables = [
        pa.table({n: cols.get(n, [None] * 300) for n in schema.names} | {"phase": ["measure"] * 300}, schema=schema)
        for cols, schema in ((sent, SENT_SCHEMA), (received, RECEIVED_SCHEMA))
    ]
    window = (0, 3_000_000_000)
    analysis = analyze(*tables, "e2e", None, window, 100.0)
    (tmp_path / "result.json").write_text(json.dumps({"phases": {"measure_start_ns": 0, "measure_end_ns": window[1]}}))
    return CellReport(cell, "ok", None, analysis, tmp_path, [])


def test_a_backlog_objective_judges_a_step_by_the_messages_sent_and_not_yet_received(tmp_path: Path) -> None:
    """The backlog was 0 for 60 % of the phase and 1 for 40 %: `backlog p50 < 1 msgs` holds, `backlog p90 < 1
    msgs` breaks, and the step's account gives the backlog in messages."""
    from bench_tasks.capacity.judge import judge

    report = paced_cell_report(tmp_path)
    held = judge(report, [parse_objective("backlog p50 < 1 msgs")])
    assert (held.verdict, held.why) == ("pass", "backlog p50 0 msgs")
    broken = judge(report, [parse_objective("e2e p99 < 10ms"), parse_objective("backlog p90 < 1 msgs")])
    assert broken.verdict == "objective"
    assert broken.why == "backlog p90 < 1 msgs broken: backlog p90 1 msgs"


def test_a_search_held_to_its_backlog_only_charts_and_tabulates_the_latency_it_measured() -> None:
    """Objectives that bound only the backlog (messages, not time) draw no line on the latency chart; the chart and
    the steps table show the response times of the metric the steps measured."""
    from bench_tasks.report.capacity_view import capacity_chart
    from spark_jobs.capacity import capacity_rows
    from spark_jobs.lakeio import RunRef

    search = Search(1000, 4000)
    for rate in (1000, 2000, 4000):
        shown = {"e2e": {"50": 1.0, "99": rate / 1e3, "99.9": None, "max": 9.0}}
        verdict = "pass" if rate < 4000 else "objective"
        search.record(Step(rate, verdict, "backlog p99 0 msgs", f"s{rate}", rate, rate, shown))  # type: ignore[arg-type]
    ident = {"cell_id": "c", "series_key": "k", "label": "l", "objectives": ["backlog p99 < 1000 msgs"]}
    result = ident | search.result()
    svg = capacity_chart(result)
    assert 'id="p99"' in svg and "backlog p99 &lt; 1000 msgs" not in svg
    _cells, steps = capacity_rows(RunRef("r", "2026-01-01"), [result])
    assert {row[-4] for row in steps} == {"e2e"} and [row[-2] for row in steps] == [1.0, 2.0, 4.0]
