"""The cell part's per-worker timeline: a file's tests merge into one span, and the worker that ended last comes
first."""

from __future__ import annotations

from types import SimpleNamespace

from tests.worker_timeline import WorkerTimeline


def _report(worker: str, nodeid: str, start: float, stop: float) -> SimpleNamespace:
    return SimpleNamespace(
        node=SimpleNamespace(gateway=SimpleNamespace(id=worker)), nodeid=nodeid, start=start, stop=stop
    )


def test_a_file_s_tests_are_one_span_and_the_last_worker_comes_first() -> None:
    timeline = WorkerTimeline(started=100.0)
    for report in (
        _report("gw0", "tests/a.py::one", 101.0, 103.0),
        _report("gw0", "tests/a.py::two", 103.0, 110.0),
        _report("gw1", "tests/b.py::one", 101.0, 150.0),
        _report("gw0", "tests/c.py::one", 110.0, 120.0),
    ):
        timeline.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    lines = timeline.lines()
    assert lines[0] == "gw1: tests from 1 s to 50 s of the session, 49 s in 1 file(s)"
    gw0 = lines[lines.index("gw0: tests from 1 s to 20 s of the session, 19 s in 2 file(s)") + 1 :]
    files = [line.split()[-1] if line.startswith("    ") else line for line in gw0]
    assert files == ["  longest:", "tests/c.py", "tests/a.py", "  last:", "tests/a.py", "tests/c.py"]
    assert gw0[1] == "      10.0s  tests/c.py"


def test_a_report_from_no_worker_is_left_out_and_the_plugin_can_be_registered() -> None:
    timeline = WorkerTimeline()
    timeline.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/a.py::one", start=1.0, stop=2.0))  # type: ignore[arg-type]
    assert timeline.lines() == []
    assert {timeline}  # pluggy keeps plugins in sets: a session without workers registers it too
